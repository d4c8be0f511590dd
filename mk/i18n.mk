# The interface's words in each locale (src/normdive/i18n/locale/<code>/LC_MESSAGES): Babel
# extracts them from the Python and the templates (babel.cfg) into messages.pot, merges that
# into each locale's messages.po, and compiles each .po to the messages.mo the app reads. The
# .mo files are committed, so `make run` needs no step of its own; tests/test_i18n_catalogues.py
# fails when one is not the compilation of its .po.

I18N_DIR := src/normdive/i18n
I18N_POT := $(I18N_DIR)/messages.pot
I18N_LOCALES_DIR := $(I18N_DIR)/locale
PYBABEL := $(BIN)/pybabel
# pgettext's first argument is its context, the second the message; N_ marks a word translated
# where it is shown.
I18N_KEYWORDS := -k pgettext:1c,2 -k N_

.PHONY: i18n-extract i18n-update i18n-compile i18n-init

i18n-extract: $(VENV)/.installed-base
	$(PYBABEL) extract -F babel.cfg $(I18N_KEYWORDS) --no-location --sort-output \
	  --project normdive --omit-header -o $(I18N_POT) .

i18n-update: i18n-extract
	$(PYBABEL) update -i $(I18N_POT) -d $(I18N_LOCALES_DIR) --no-fuzzy-matching

i18n-compile: $(VENV)/.installed-base
	$(PYBABEL) compile -d $(I18N_LOCALES_DIR) --statistics

# A new locale: make i18n-init LOCALE=fr (then translate its messages.po and compile).
i18n-init: i18n-extract
	$(PYBABEL) init -i $(I18N_POT) -d $(I18N_LOCALES_DIR) -l $(LOCALE)
