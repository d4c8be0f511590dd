"""LTI 1.3 with LTI Advantage: the lesson as a tool an LMS (the platform) launches in a course.

    lti/registrations.py:  the platforms registered (issuer, client id, their URLs, the
                           deployments, the origins that frame the lesson, how 8.5 is
                           checked); register, list, remove
    lti/platform_keys.py:  a platform's key set, fetched from its JWKS URL with a timeout,
                           kept in the database, fetched again for an unknown key id (or one
                           whose key fails a signature) at most once per cooldown
    lti/platform_json.py:  JSON from a platform parsed with its nesting bounded, so a hostile
                           shape is a refusal like any other malformed answer
    lti/platform_http.py:  a platform's answer read as it arrives, up to a limit
    lti/login.py:          OIDC third-party login initiation: a state and a nonce stored (and
                           a secret for the platform's storage when it offers it), the browser
                           sent to the platform's authorization endpoint
    lti/launch.py:         the id_token the platform posts back, validated completely, or a
                           Refusal (refusal.py) that tells an administrator what is wrong
    lti/learners.py:       a launch's user as one learner, their course, 8.5 as the
                           registration says, staff passing the lock
    lti/passback.py:       grade passback (AGS): grade targets, the score outbox (filled by a
                           trigger on events), the sender behind `normdive lti passback`
    lti/tool_keys.py:      the tool's own signing keys, their key set, rotation
    lti/deep_linking.py:   the signed deep linking response offering the lesson
    lti/dynamic_registration.py: the invitation URL (one registration each) and the
                           registration it makes
    lti/tool_config.py:    the tool's URLs and the Canvas developer key configuration

Everything a step needs lives in the database, so any worker can serve any step. The JOSE
work (signatures, key sets, claims) is joserfc's; nothing here checks a signature itself.
This layer imports config, store, progress and lesson; the web layer imports it.
"""
