#!/bin/sh
# The single-user server's entry point: the course's released notebooks in ~/tcplab at the
# learner's first start (a later start leaves their work alone), then the server itself.
set -eu
if [ ! -e "$HOME/tcplab" ]; then
  if ! mkdir -p "$HOME/tcplab" 2>/dev/null; then
    echo "tcplab: the home folder $HOME cannot be written (uid $(id -u)): the course's notebooks stay in" \
         "/opt/tcplab/release, and runs go to /tmp/tcplab-$(id -u)/runs" >&2
  else
    cp -r /opt/tcplab/release/. "$HOME/tcplab/"
  fi
fi
exec "$@"
