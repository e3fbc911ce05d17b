// Faults on purpose, for the fault-matrix and crash-safety tests. ACCELERATE_TEST_FAULT is
//   POINT[@N]:RANK:ACTION
// and makes process RANK (its RANK variable; `*` for any) fail the N-th time (default 1) it
// reaches POINT:
//   rendezvous     before it contacts the rendezvous store
//   arrived        checked in at the rendezvous' first stage, the other ranks not yet seen
//   joined         checked in at its last stage (done with the store), the others not yet seen
//   shared-memory  the segment made or mapped, its name not yet removed from /dev/shm
//   all-reduce     its input handed over, the sum not yet complete
//   save           a checkpoint file written, the checkpoint not yet complete
// ACTION is kill (SIGKILL), segv (SIGSEGV), exit (status 1, no clean-up), hang (never
// returns, answers nothing) or stall (sleeps 2 s, then goes on: a slow rank, for races).
// Unset, each point costs one comparison.
#pragma once

#include <string_view>

namespace accelerate::detail {

void test_fault_point(std::string_view point);

} // namespace accelerate::detail
