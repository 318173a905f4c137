# The GPU simulator (tests/sim, loaded as nvidia): buffers in each layout,
# its knobs and counters, driven through nvpm-tool.
. /tests/lib.sh
sim_unload
G=/sys/kernel/debug/nvidia_sim

expect_ok load modprobe nvidia
expect_dmesg banner "gpu_sim: simulated GPU ready: 4096 MiB, page table ABI 2.0, persistent API supported"
expect_ok ctl-file test -w $G/ctl

# Layouts: the lengths of the runs of contiguous 64 KiB bus pages.
va_c=$(nvpm-tool gpu alloc 1M --layout contiguous)
va_f=$(nvpm-tool gpu alloc 1M --layout fragmented)
va_s=$(nvpm-tool gpu alloc 1M --layout shuffled)
expect_eq contiguous-runs "16" "$(nvpm-tool gpu runs "$va_c" 2>&1)"
expect_eq fragmented-runs "2 1 3 2 1 3 2 1 1" "$(nvpm-tool gpu runs "$va_f" 2>&1)"
runs=$(nvpm-tool gpu runs "$va_s" 2>&1)
if [ "$(echo "$runs" | wc -w)" -gt 8 ]; then pass shuffled-runs; else fail shuffled-runs "runs '$runs'"; fi
expect_eq buffer-line "$va_s 1048576 shuffled allocated 0" "$(grep "^$va_s " $G/buffers)"
expect_eq pages-listed 48 "$(wc -l <$G/pages)"
expect_counter buffers-live gpu buffers.live 3

# Sizes round up to 64 KiB; bad requests fail with a message.
va_r=$(nvpm-tool gpu alloc 100K)
expect_eq rounded-up "$va_r 131072 contiguous allocated 0" "$(grep "^$va_r " $G/buffers)"
expect_fail alloc-zero nvpm-tool gpu alloc 0
out=$(nvpm-tool gpu alloc 1M --layout zigzag 2>&1)
expect_eq alloc-bad-layout "nvpm-tool: GPU simulator: 'alloc 1048576 zigzag' failed (EINVAL): unknown layout 'zigzag'" "$out"
expect_fail alloc-too-big nvpm-tool gpu alloc 8G
expect_fail free-unknown nvpm-tool gpu free 0x1000
expect_fail usage-error nvpm-tool gpu alloc

# Knobs are module parameters, read and set by name.
expect_eq pt-version-default 2.0 "$(nvpm-tool gpu get page_table_version 2>&1)"
expect_ok pt-version-set nvpm-tool gpu set page_table_version 1.2
expect_eq pt-version-1.2 1.2 "$(cat /sys/module/nvidia/parameters/page_table_version)"
expect_fail pt-version-bad nvpm-tool gpu set page_table_version 3.0
expect_ok pt-version-back nvpm-tool gpu set page_table_version 2.0
expect_fail bad-data-bad nvpm-tool gpu set bad_data everything
expect_eq default-layout contiguous "$(nvpm-tool gpu get default_layout 2>&1)"

# Injections are listed until they fire or are cleared.
expect_ok inject nvpm-tool gpu inject get_pages 3 ENOMEM 2
expect_eq injections "get_pages 2 2 -12" "$(nvpm-tool gpu injections 2>&1)"
expect_fail inject-no-op nvpm-tool gpu inject free_page_table 1 EIO
expect_fail inject-unknown nvpm-tool gpu inject get_page 1 EIO
expect_ok inject-off nvpm-tool gpu inject off
expect_eq injections-off "" "$(nvpm-tool gpu injections 2>&1)"

# Freeing unpinned buffers fires no callback.
expect_eq free-contiguous 0 "$(nvpm-tool gpu free "$va_c" 2>&1)"
expect_eq free-fragmented 0 "$(nvpm-tool gpu free "$va_f" 2>&1)"
expect_eq free-shuffled 0 "$(nvpm-tool gpu free "$va_s" 2>&1)"
expect_eq free-rounded 0 "$(nvpm-tool gpu free "$va_r" 2>&1)"
expect_counter buffers-freed gpu buffers.live 0
expect_eq pages-freed 0 "$(wc -l <$G/pages)"
expect_ok clean nvpm-tool expect-clean
expect_ok unload rmmod nvidia
expect_dmesg unload-line "gpu_sim: simulated GPU removed"
