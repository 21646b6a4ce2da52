#!/bin/bash
# trainer entrypoint (trainjob-operator): start a Flux broker on every pod; the lead broker runs the
# TrainJob's command with `flux run`, the others serve as followers until it is done.
base=@install_path@
view=$base/view
config=$base/config
mainHost="@lead_host@"
flags="@flags@"
command="$*"

export PATH=$PATH:$view/bin
cp -R "$base"/software/* @software_path@/

# Flux's Python modules come from the view.
pyroot=$(find "$view" -maxdepth 2 -type d -path "$view/lib/python3*" 2>/dev/null | head -n 1)
if [ -n "$pyroot" ] && [ -f "$view/bin/$(basename "$pyroot")" ]; then
  rm -rf "$view/bin/python3" "$view/bin/python"
  ln -s "$view/bin/$(basename "$pyroot")" "$view/lib/python" || true
  ln -s "$view/bin/$(basename "$pyroot")" "$view/lib/python3" || true
fi
export PYTHONPATH=${PYTHONPATH:-}:$pyroot/site-packages
export FLUX_RC_EXTRA=$view/etc/flux/rc1.d

# Environment for interactive use: source $base/flux-view.sh
cat > "$base/flux-view.sh" <<EOF
export PATH=$PATH
export PYTHONPATH=$PYTHONPATH
export LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}:$view/lib
export fluxsocket=local://$config/run/flux/local
EOF
cat > "$base/load-fluxion.sh" <<EOF
flux module remove sched-simple
flux module load sched-fluxion-resource
flux module load sched-fluxion-qmanager
EOF

# The CURVE certificate must be readable by its owner only.
cert=$config/etc/curve/@curve_key@
cp @curve_path@/@curve_key@ "$cert"
chmod go-r "$cert"
chown -R "$(id -u)" "$cert"

hosts=$(cat "$config/etc/flux/system/hostlist")
flux R encode --hosts=$hosts @resource_spec@ > "$config/etc/flux/system/R"

export STATE_DIR=$config/var/lib/flux
export FLUX_OUTPUT_DIR=/tmp/fluxout
mkdir -p "$STATE_DIR" "$FLUX_OUTPUT_DIR" "$config/etc/flux/system/cron.d"
cfg=$config/etc/flux/config
broker_options="-Scron.directory=$config/etc/flux/system/cron.d -Stbon.fanout=256 -Srundir=$config/run/flux \
  -Sstatedir=$STATE_DIR -Slocal-uri=local://$config/run/flux/local -Slog-stderr-level=0 -Slog-stderr-mode=local"

if [ "$(hostname)" = "$mainHost" ]; then
  if [ -z "$command" ]; then
    echo "no command: starting an interactive Flux broker"
    flux broker --config-path "$cfg" $broker_options
  else
    echo "flux run $flags $command"
    flux start -o --config "$cfg" $broker_options flux run $flags $command
  fi
else
  # A follower retries until the lead broker is up, and ends when the lead ends.
  until flux start -o --config "$cfg" $broker_options; do
    echo "follower broker exited with $?, retrying in 15s"
    sleep 15
  done
fi
touch "$base/flux-operator-complete.txt"
