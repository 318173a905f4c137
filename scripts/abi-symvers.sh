#!/bin/sh
# Writes a Module.symvers fragment naming the functions of the project's ABI
# headers with their usual owners (nvidia, ib_core), for modpost when no
# vendor Module.symvers is given. CRCs are zero: Debian's 7.3 kernel has
# CONFIG_MODVERSIONS off, so symbols resolve by name at load time.
# Usage: abi-symvers.sh src/ffi > build/abi.symvers
set -eu
dir=$1
sed -n 's/^int \(nvidia_p2p_[a-z_]*\)(.*/\1/p' "$dir/nv-p2p.h" |
	while read -r sym; do printf '0x00000000\t%s\tnvidia\tEXPORT_SYMBOL_GPL\t\n' "$sym"; done
for sym in ib_register_peer_memory_client ib_unregister_peer_memory_client; do
	printf '0x00000000\t%s\tib_core\tEXPORT_SYMBOL\t\n' "$sym"
done
