// latentlab-engine: the headless engine (placeholder until the verbs land).
#include <cstdio>
int main() { std::printf("latentlab-engine\n"); return 0; }
