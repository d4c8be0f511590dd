"""What a page shows: view models built from a learner's state and the recording, and their
rendering."""
