"""Defences against requests a learner did not mean to send: the form token and the Origin
check (csrf), and the limit on how often one learner may write (ratelimit). The security
headers every response carries are set by the app factory (normdive.web.app)."""
