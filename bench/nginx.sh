# Shared nginx helper for the benchmark scripts. Source it, do not run it:
#
#   . bench/nginx.sh
#   bench_require_packages nginx time python3 curl ...    # apt-installs whatever is missing
#   nginx_start WORK_DIR ROOT_DIR [ACCESS_LOG]            # sets NGINX_PID, NGINX_PORT, NGINX_CONF
#   ...
#   nginx_stop                                            # kill -TERM $NGINX_PID, wait for it
#
# nginx runs in the foreground (`daemon off`) as a child of the calling shell, with its own config,
# pid, error log and temp folders under WORK_DIR, on a free port of 127.0.0.1. It is stopped by its
# PID, never by name. With ACCESS_LOG, every request is logged there in the "bench" format:
#
#   $msec $status $request_method "$request_uri" $bytes_sent $body_bytes_sent "$http_if_none_match"
#
# (bench/scenarios.py counts requests and bytes from it); without it, `access_log off`.

BENCH_SUDO=""
[ "$(id -u)" = 0 ] || BENCH_SUDO=sudo

_bench_log() { echo "[nginx.sh $(date +%H:%M:%S)] $*" >&2; }

# bench_require_packages NAME... : NAME is a command; its Debian package is looked up below.
bench_require_packages() {
  local cmd pkg missing=()
  for cmd in "$@"; do
    case "$cmd" in
      nginx) [ -x /usr/sbin/nginx ] || command -v nginx >/dev/null || missing+=(nginx-light) ;;
      time) [ -x /usr/bin/time ] || missing+=(time) ;;
      aria2c) command -v aria2c >/dev/null || missing+=(aria2) ;;
      *) command -v "$cmd" >/dev/null || missing+=("$cmd") ;;
    esac
  done
  [ ${#missing[@]} -gt 0 ] || return 0
  _bench_log "installing: ${missing[*]}"
  $BENCH_SUDO apt-get update -qq
  if ! DEBIAN_FRONTEND=noninteractive $BENCH_SUDO apt-get install -y -qq "${missing[@]}"; then
    # nginx-light is a transitional package on some releases; fall back to nginx.
    DEBIAN_FRONTEND=noninteractive $BENCH_SUDO apt-get install -y -qq "${missing[@]/nginx-light/nginx}"
  fi
}

nginx_binary() {
  command -v nginx 2>/dev/null || { [ -x /usr/sbin/nginx ] && echo /usr/sbin/nginx; } || return 1
}

NGINX_PID=""
NGINX_PORT=""

# nginx_start WORK_DIR ROOT_DIR [ACCESS_LOG]
nginx_start() {
  local dir=$1 root=$2 access_log=${3:-} nginx user_line="" log_line="access_log off;"
  nginx=$(nginx_binary) || { echo "nginx.sh: nginx is not installed" >&2; return 1; }
  mkdir -p "$dir/tmp"
  NGINX_PORT=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  [ "$(id -u)" = 0 ] && user_line="user root;"
  [ -n "$access_log" ] && log_line="access_log $access_log bench;"
  NGINX_CONF="$dir/nginx.conf"
  cat > "$NGINX_CONF" <<EOF
daemon off;
$user_line
worker_processes 1;
pid $dir/nginx.pid;
error_log $dir/error.log warn;
events { worker_connections 256; }
http {
    log_format bench '\$msec \$status \$request_method "\$request_uri" \$bytes_sent \$body_bytes_sent "\$http_if_none_match"';
    $log_line
    sendfile on;
    tcp_nopush on;
    keepalive_timeout 30;
    keepalive_requests 100000;
    types { application/json json; application/zip zip; }
    default_type application/octet-stream;
    client_body_temp_path $dir/tmp/client;
    proxy_temp_path $dir/tmp/proxy;
    fastcgi_temp_path $dir/tmp/fastcgi;
    uwsgi_temp_path $dir/tmp/uwsgi;
    scgi_temp_path $dir/tmp/scgi;
    server {
        listen 127.0.0.1:$NGINX_PORT;
        root $root;
        location /nolog/ { access_log off; }
    }
}
EOF
  "$nginx" -p "$dir" -c "$NGINX_CONF" -e "$dir/error.log" &
  NGINX_PID=$!
  local _
  for _ in $(seq 1 100); do
    curl -s -o /dev/null "http://127.0.0.1:$NGINX_PORT/" && break
    if ! kill -0 "$NGINX_PID" 2>/dev/null; then
      cat "$dir/error.log" >&2
      NGINX_PID=""
      echo "nginx.sh: nginx did not start" >&2
      return 1
    fi
    sleep 0.05
  done
  _bench_log "nginx (pid $NGINX_PID) serves $root on 127.0.0.1:$NGINX_PORT"
}

nginx_stop() {
  if [ -n "$NGINX_PID" ]; then
    kill -TERM "$NGINX_PID" 2>/dev/null || true
    wait "$NGINX_PID" 2>/dev/null || true
    _bench_log "nginx (pid $NGINX_PID) stopped"
    NGINX_PID=""
  fi
}
