"""What every request leans on: the services a handler has to hand, identity, errors, assets,
serving."""
