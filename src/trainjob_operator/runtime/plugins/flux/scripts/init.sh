#!/bin/bash
# flux-installer (trainjob-operator): share the Flux view of this image with the trainer container
# and write the broker configuration every pod of the TrainJob uses.
fluxroot=@view_root@
hosts="@hosts@"
base=@install_path@
config=$base/config

echo "flux-installer on $(hostname): Flux view $fluxroot, hosts $hosts"
mkdir -p "$fluxroot/bin" "$config/etc/flux/system/cron.d" "$config/etc/flux/config" \
  "$config/var/lib/flux" "$config/run/flux" "$config/etc/curve" "$base/view"
echo "$hosts" > "$config/etc/flux/system/hostlist"

cat > "$config/etc/flux/config/broker.toml" <<'BROKER_TOML'
@broker@
BROKER_TOML
echo "broker configuration:"
cat "$config/etc/flux/config/broker.toml"

# /opt/view links into a spack view; copy its target and the software it links to.
view=/opt/views/._view/$(ls /opt/views/._view/)
cp -R "$view"/* "$base/view"
cp -R /opt/software "$base/"
touch "$base/flux-operator-done.txt"
echo "flux-installer: done"
