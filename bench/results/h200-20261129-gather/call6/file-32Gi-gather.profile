gpusort: profile:    0.000 s  (+0.000 s) inputs opened
gpusort: profile:    0.406 s  (+0.406 s) engine started (devices opened)
gpusort: profile:    0.408 s  (+0.002 s) journal created
gpusort: profile:   13.094 s  (+12.686 s) sorted
gpusort: profile:   14.453 s  (+1.360 s) files not synced (--no-sync)
gpusort: profile: round 1 host journal and room: 3.57 GiB in 1 chunks, busy 0.965 s of 0.000-0.965 s
gpusort: profile: round 1 host pinned staging made for cuda:0 (NVIDIA H200): 256.01 MiB in 1 chunks, busy 0.320 s of 0.000-0.320 s
gpusort: profile: round 1 host device buffers made on cuda:0 (NVIDIA H200): 20.00 GiB in 1 chunks, busy 0.097 s of 0.000-0.097 s
gpusort: profile: round 1 cuda:0 (NVIDIA H200) copy in: 32.00 GiB in 9 chunks, busy 2.675 s of 0.031-6.754 s
gpusort: profile: round 1 cuda:0 (NVIDIA H200) sort: 32.00 GiB in 9 chunks, busy 2.512 s of 0.599-6.772 s
gpusort: profile: round 1 cuda:0 (NVIDIA H200) copy out: 32.00 GiB in 9 chunks, busy 4.136 s of 2.961-7.098 s
gpusort: profile: round 1 all round: 32.00 GiB in 9 chunks, busy 7.514 s of 0.000-7.514 s
gpusort: profile: round 2 host buckets: 0 B in 83 chunks, busy 0.021 s of 0.000-0.021 s
gpusort: profile: round 2 cuda:0 (NVIDIA H200) copy in: 32.00 GiB in 83 chunks, busy 3.140 s of 0.002-4.146 s
gpusort: profile: round 2 cuda:0 (NVIDIA H200) sort: 32.00 GiB in 83 chunks, busy 0.162 s of 0.047-4.150 s
gpusort: profile: round 2 cuda:0 (NVIDIA H200) copy out: 32.00 GiB in 83 chunks, busy 3.080 s of 0.050-4.182 s
gpusort: profile: round 2 all round: 32.00 GiB in 83 chunks, busy 4.182 s of 0.000-4.182 s
gpusort: profile: round 2 host evictions: 16.63 GiB in 17028 chunks, busy 3.969 s of 0.000-3.969 s
gpusort: profile: round 2 host eviction waits: 0 B in 17028 chunks, busy 0.156 s of 0.000-0.156 s
