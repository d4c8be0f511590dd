"""The learner's language: which locales the lesson speaks, how one is chosen for a request,
and the gettext catalogues of the interface's words (locale/<code>/LC_MESSAGES/messages.po,
compiled to messages.mo beside it)."""
