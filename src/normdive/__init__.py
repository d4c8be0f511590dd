"""normdive: deep dive D9 "Layer norm and residuals" of the track "Learn machine learning"."""

__version__ = "0.1.0"
