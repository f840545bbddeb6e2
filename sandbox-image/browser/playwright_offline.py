"""Pages opened with Playwright in the browser image get p5.js from the image, not from a CDN.

The public algorithmic-art skill's viewer (and the pages it tells a model to write) load p5.js from a CDN; the
sandbox has no network, so the copy in ``/opt/node_modules/p5`` answers those requests instead. Installed by a
``.pth`` line, this module only adds an import hook (nothing is imported before a script imports Playwright); when
Playwright's client instrumentation is loaded, every browser context it creates gets one route for the CDN URLs
of p5 (cdnjs, jsDelivr, unpkg). Any other request is untouched (and fails: there is no network).
"""

import importlib.abc
import importlib.util
import re
import sys

P5_LIB = "/opt/node_modules/p5/lib/"
P5_URL = re.compile(
    r"^https?://(?:cdnjs\.cloudflare\.com/ajax/libs/p5\.js/[^/]+/"
    r"|cdn\.jsdelivr\.net/npm/p5(?:@[^/]+)?/lib/"
    r"|unpkg\.com/p5(?:@[^/]+)?/lib/)"
    r"(p5(?:\.min)?\.js)(?:[?#].*)?$"
)
HOOKED = "playwright._impl.client_instrumentation"


def serve_p5(route, request):
    name = P5_URL.match(request.url).group(1)
    return route.fulfill(
        response=None,
        status=200,
        headers={"access-control-allow-origin": "*"},
        content_type="application/javascript",
        body=None,
        json=None,
        path=P5_LIB + name,
    )


class _OfflineCdn:
    async def run_after_create_browser_context(self, context):
        await context.route(P5_URL, serve_p5, None)


def _patch(module):
    original = module.ClientInstrumentation.__init__

    def __init__(self, *args, **kwargs):
        original(self, *args, **kwargs)
        self.add_listener(_OfflineCdn())

    module.ClientInstrumentation.__init__ = __init__


class _Hook(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name != HOOKED:
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(name)
        if spec is None or spec.loader is None:
            return spec
        load = spec.loader.exec_module

        def exec_module(module):
            load(module)
            _patch(module)

        spec.loader.exec_module = exec_module
        return spec


def install():
    if not any(isinstance(finder, _Hook) for finder in sys.meta_path):
        sys.meta_path.insert(0, _Hook())
