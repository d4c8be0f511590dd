"""Defences: the form token and Origin check, framing, proxies, limits and security headers."""
