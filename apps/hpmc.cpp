// hpmc — command-line entry point (being built up; see README.md).
#include <cstdio>
int main() { std::puts("hpmc " HPMC_VERSION); return 0; }
