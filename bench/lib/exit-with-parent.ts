// Preloaded (`node --import`) into the extension processes a benchmark starts:
// when the benchmark dies without stopping them (SIGKILL, a crash), their IPC
// channel closes and they stop as a pod would, through their own SIGTERM
// handler, instead of staying behind on the machine.
process.on('disconnect', () => process.kill(process.pid, 'SIGTERM'));
