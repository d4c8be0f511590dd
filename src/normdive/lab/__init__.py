"""The live lab: the portable generator (lab32) and the configuration a learner trains.
Torch-free: the JavaScript trainer twins the generator (docs/lab.md); the recorded grid's file
is the recording format's (normdive.recording.lab_grid)."""
