#!/bin/sh
# Start mitmproxy for one job. The policy comes in EGRESS_POLICY (JSON, read by the addon); the CA private key is
# made here, in this container's tmpfs, and never leaves it. Upstreams are verified against the system CAs plus
# EGRESS_UPSTREAM_CA (the operator's egress.upstream_ca_file), if given.
set -eu
umask 077
mkdir -p /tmp/confdir
cat /etc/ssl/certs/ca-certificates.crt > /tmp/upstream-trust.pem
if [ -n "${EGRESS_UPSTREAM_CA:-}" ]; then printf '%s\n' "$EGRESS_UPSTREAM_CA" >> /tmp/upstream-trust.pem; fi
unset EGRESS_UPSTREAM_CA
exec mitmdump --quiet \
  --listen-port 3128 \
  --set confdir=/tmp/confdir \
  --set ssl_verify_upstream_trusted_ca=/tmp/upstream-trust.pem \
  --set connection_strategy=lazy \
  --set onboarding=false \
  --set rawtcp=false \
  --set http2=true \
  --set block_global=true \
  -s /opt/egress/egress_addon.py
