"""The learner's language: the locales, the choice of one per request, gettext catalogues."""
