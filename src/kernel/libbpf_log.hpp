#pragma once
// libbpf's messages as the loader needs them: the verdict of the last
// verifier log libbpf warned, to explain a refused load in one line.
#include <string>

namespace netlatd {

// Forgets the last verdict: the next load's refusal is its own.
void forget_verifier_verdict();
// "program NAME: VERDICT" from the last verifier log warned since; "" if none.
std::string last_verifier_verdict();

}  // namespace netlatd
