"""LTI 1.3: the lesson as a tool an LMS (the platform) launches in a course.

    lti/registrations.py: the platforms registered (issuer, client id, their URLs, the
                          deployments, how 8.5 is checked); register, list, remove
    lti/platform_keys.py: a platform's key set, fetched from its JWKS URL with a timeout,
                          kept in the database, fetched again once for an unknown key id
    lti/login.py:         OIDC third-party login initiation: a state and a nonce stored, the
                          browser sent to the platform's authorization endpoint
    lti/launch.py:        the id_token the platform posts back, validated completely, or a
                          Refusal that tells an administrator what is wrong

Everything a step needs lives in the database, so any worker can serve any step. The JOSE
work (signatures, key sets, claims) is joserfc's; nothing here checks a signature itself.
This layer imports config, store and progress; the web layer imports it.
"""
