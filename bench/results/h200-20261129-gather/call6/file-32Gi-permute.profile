gpusort: profile:    0.000 s  (+0.000 s) inputs opened
gpusort: profile:    0.336 s  (+0.336 s) engine started (devices opened)
gpusort: profile:    0.337 s  (+0.001 s) journal created
gpusort: profile:   11.618 s  (+11.280 s) sorted
gpusort: profile:   13.001 s  (+1.383 s) files not synced (--no-sync)
gpusort: profile: round 1 host journal and room: 3.57 GiB in 1 chunks, busy 0.893 s of 0.000-0.893 s
gpusort: profile: round 1 host pinned staging made for cuda:0 (NVIDIA H200): 256.01 MiB in 1 chunks, busy 0.322 s of 0.000-0.322 s
gpusort: profile: round 1 host device buffers made on cuda:0 (NVIDIA H200): 20.00 GiB in 1 chunks, busy 0.095 s of 0.000-0.095 s
gpusort: profile: round 1 cuda:0 (NVIDIA H200) copy in: 32.00 GiB in 9 chunks, busy 2.340 s of 0.027-5.610 s
gpusort: profile: round 1 cuda:0 (NVIDIA H200) sort: 32.00 GiB in 9 chunks, busy 2.484 s of 0.530-5.628 s
gpusort: profile: round 1 cuda:0 (NVIDIA H200) copy out: 32.00 GiB in 9 chunks, busy 2.968 s of 2.864-5.832 s
gpusort: profile: round 1 all round: 32.00 GiB in 9 chunks, busy 6.249 s of 0.000-6.249 s
gpusort: profile: round 2 host buckets: 0 B in 39 chunks, busy 0.025 s of 0.000-0.025 s
gpusort: profile: round 2 host evacuation: 171.00 MiB in 1 chunks, busy 0.018 s of 0.000-0.018 s
gpusort: profile: round 2 host block moves: 30.19 GiB in 30910 chunks, busy 1.539 s of 0.000-1.539 s
gpusort: profile: round 2 host cleanup: 171.00 MiB in 39 chunks, busy 0.012 s of 0.000-0.012 s
gpusort: profile: round 3 cuda:0 (NVIDIA H200) copy in: 32.00 GiB in 39 chunks, busy 2.395 s of 0.000-2.481 s
gpusort: profile: round 3 cuda:0 (NVIDIA H200) sort: 32.00 GiB in 39 chunks, busy 0.162 s of 0.069-2.489 s
gpusort: profile: round 3 cuda:0 (NVIDIA H200) copy out: 32.00 GiB in 39 chunks, busy 2.352 s of 0.077-2.543 s
gpusort: profile: round 3 all round: 32.00 GiB in 39 chunks, busy 2.544 s of 0.000-2.544 s
