// Node's part of a granted call's egress (docs/operations/egress.md). Node 18 ignores HTTPS_PROXY, so a call of a
// skill granted network loads this first (NODE_OPTIONS=--require, set in those calls only; the job writes this
// file beside the proxy's CA). It routes fetch (undici's EnvHttpProxyAgent as the global dispatcher) and the
// http/https modules (global-agent) through the job's egress proxy; the proxy's CA comes from NODE_EXTRA_CA_CERTS.
// It grants nothing: a client that bypasses it reaches no host, as any connection that ignores the proxy.
'use strict';

const proxy = process.env.HTTPS_PROXY || process.env.https_proxy;

function route(what, apply) {
  try {
    apply();
  } catch (error) {
    process.emitWarning(`egress: ${what} is not routed through the proxy: ${error && error.message}`);
  }
}

if (proxy) {
  route('fetch', () => {
    const undici = require('undici');
    undici.setGlobalDispatcher(new undici.EnvHttpProxyAgent());
  });
  route('the http and https modules', () => {
    require('global-agent').bootstrap();
    global.GLOBAL_AGENT.HTTP_PROXY = proxy;
    global.GLOBAL_AGENT.HTTPS_PROXY = proxy;
  });
}
