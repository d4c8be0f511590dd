"""The lab: the portable generator (lab32) and the lab grid's file format. Torch-free: the
web app reads the grid, and the JavaScript trainer twins the generator (docs/lab.md)."""
