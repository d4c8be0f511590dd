"""The web app: Starlette, server-rendered Jinja2 pages, small ES modules. Never imports torch.

routes/ parse a request, make one service call and answer; views/ build and render what a page
shows; infrastructure/ is what every request leans on (services, identity, errors, assets,
serving); security/ holds the refusals and the middlewares that enforce them."""
