"""The web app: FastAPI, server-rendered Jinja2 pages, small ES modules. Never imports torch."""
