"""Defences against requests a learner did not mean to send: the form token and the Origin
check (csrf), the limits on how often one learner may write and how many learners one address
may start (ratelimit), and which proxy's forwarded headers to believe (proxy). The security
headers every response carries are set by the app factory (normdive.web.app)."""
