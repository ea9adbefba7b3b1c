/**
 * Whether a process id is still taken on this host: false once the process has exited and been reaped (signal 0
 * only checks that the pid exists; EPERM means it exists under another user).
 */
export function processExists(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === "EPERM";
  }
}
