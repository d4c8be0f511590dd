"""The live lab, torch-free: the portable generator (lab32) and the config a learner trains."""
