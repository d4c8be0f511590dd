"""The HTTP routes: each module a list of Starlette routes that parse a request, make one service
call and answer."""
