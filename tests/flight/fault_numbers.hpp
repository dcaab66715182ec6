// The numbers the injected faults (faults.hpp) are built on, apart from
// their code so that the checks of their diagnosis (fault_checks.hpp) can
// use them without LibTorch.
#pragma once

namespace distlab::flight_test {

inline constexpr int kFaultSeq = 4;     // the collective of group world the faults are at
inline constexpr int kP2pRounds = 3;    // p2p: messages round the ranks; the culprit mistags the last
inline constexpr int kP2pWrongTag = 1;  // p2p: the culprit's tag in the last round (the others use 0)

}  // namespace distlab::flight_test
