package container

// allowedSyscalls are let through unconditionally under SeccompDefault.
// They are Docker's default allow list (moby/profiles v0.3.0, for the
// capabilities of defaultCaps) as it applies to amd64 and arm64, with the
// differences SECURITY.md's table gives reasons for: clock_adjtime and
// name_to_handle_at are refused; sethostname, setdomainname (the kernel
// wants CAP_SYS_ADMIN), file_getattr, file_setattr and any personality are
// allowed; ptrace, process_vm_readv and process_vm_writev are allowed but
// at pid 1, clone without CLONE_NEWUSER, and socket for the families not
// in deniedSocketFamilies (see seccompRules). A name the runtime's
// libseccomp does not know cannot be allowed: that call gets the default
// refusal too (TestSeccompByNumber).
var allowedSyscalls = []string{
	"accept", "accept4", "access", "adjtimex", "alarm", "arch_prctl", "bind", "brk",
	"cachestat", "capget", "capset", "chdir", "chmod", "chown", "chroot",
	"clock_getres", "clock_gettime", "clock_nanosleep", "close", "close_range",
	"connect", "copy_file_range", "creat", "dup", "dup2", "dup3",
	"epoll_create", "epoll_create1", "epoll_ctl", "epoll_ctl_old", "epoll_pwait",
	"epoll_pwait2", "epoll_wait", "epoll_wait_old", "eventfd", "eventfd2",
	"execve", "execveat", "exit", "exit_group", "faccessat", "faccessat2",
	"fadvise64", "fallocate", "fanotify_mark", "fchdir", "fchmod", "fchmodat",
	"fchmodat2", "fchown", "fchownat", "fcntl", "fdatasync", "fgetxattr",
	"file_getattr", "file_setattr", "flistxattr", "flock", "fork", "fremovexattr",
	"fsetxattr", "fstat", "fstatfs", "fsync", "ftruncate", "futex", "futex_requeue",
	"futex_wait", "futex_waitv", "futex_wake", "futimesat", "get_robust_list",
	"get_thread_area", "getcpu", "getcwd", "getdents", "getdents64", "getegid",
	"geteuid", "getgid", "getgroups", "getitimer", "getpeername", "getpgid",
	"getpgrp", "getpid", "getppid", "getpriority", "getrandom", "getresgid",
	"getresuid", "getrlimit", "getrusage", "getsid", "getsockname", "getsockopt",
	"gettid", "gettimeofday", "getuid", "getxattr", "getxattrat",
	"inotify_add_watch", "inotify_init", "inotify_init1", "inotify_rm_watch",
	"io_cancel", "io_destroy", "io_getevents", "io_pgetevents", "io_setup",
	"io_submit", "ioctl", "ioprio_get", "ioprio_set", "kill", "landlock_add_rule",
	"landlock_create_ruleset", "landlock_restrict_self", "lchown", "lgetxattr",
	"link", "linkat", "listen", "listmount", "listxattr", "listxattrat",
	"llistxattr", "lremovexattr", "lseek", "lsetxattr", "lstat", "madvise",
	"map_shadow_stack", "membarrier", "memfd_create", "memfd_secret", "mincore",
	"mkdir", "mkdirat", "mknod", "mknodat", "mlock", "mlock2", "mlockall", "mmap",
	"modify_ldt", "mprotect", "mq_getsetattr", "mq_notify", "mq_open",
	"mq_timedreceive", "mq_timedsend", "mq_unlink", "mremap", "mseal", "msgctl",
	"msgget", "msgrcv", "msgsnd", "msync", "munlock", "munlockall", "munmap",
	"nanosleep", "newfstatat", "open", "openat", "openat2", "pause", "personality",
	"pidfd_open", "pidfd_send_signal", "pipe", "pipe2", "pkey_alloc", "pkey_free",
	"pkey_mprotect", "poll", "ppoll", "prctl", "pread64", "preadv", "preadv2",
	"prlimit64", "process_mrelease", "pselect6", "pwrite64", "pwritev", "pwritev2",
	"read", "readahead", "readlink", "readlinkat", "readv", "recvfrom", "recvmmsg",
	"recvmsg", "remap_file_pages", "removexattr", "removexattrat", "rename",
	"renameat", "renameat2", "restart_syscall", "rmdir", "rseq", "rt_sigaction",
	"rt_sigpending", "rt_sigprocmask", "rt_sigqueueinfo", "rt_sigreturn",
	"rt_sigsuspend", "rt_sigtimedwait", "rt_tgsigqueueinfo", "sched_get_priority_max",
	"sched_get_priority_min", "sched_getaffinity", "sched_getattr", "sched_getparam",
	"sched_getscheduler", "sched_rr_get_interval", "sched_setaffinity",
	"sched_setattr", "sched_setparam", "sched_setscheduler", "sched_yield",
	"seccomp", "select", "semctl", "semget", "semop", "semtimedop", "sendfile",
	"sendmmsg", "sendmsg", "sendto", "set_robust_list", "set_thread_area",
	"set_tid_address", "setdomainname", "setfsgid", "setfsuid", "setgid",
	"setgroups", "sethostname", "setitimer", "setpgid", "setpriority", "setregid",
	"setresgid", "setresuid", "setreuid", "setrlimit", "setsid", "setsockopt",
	"setuid", "setxattr", "setxattrat", "shmat", "shmctl", "shmdt", "shmget",
	"shutdown", "sigaltstack", "signalfd", "signalfd4", "socketpair", "splice",
	"stat", "statfs", "statmount", "statx", "symlink", "symlinkat", "sync",
	"sync_file_range", "syncfs", "sysinfo", "tee", "tgkill", "time", "timer_create",
	"timer_delete", "timer_getoverrun", "timer_gettime", "timer_settime",
	"timerfd_create", "timerfd_gettime", "timerfd_settime", "times", "tkill",
	"truncate", "umask", "uname", "unlink", "unlinkat", "uretprobe", "utime",
	"utimensat", "utimes", "vfork", "vmsplice", "wait4", "waitid", "write", "writev",
}

// deniedSyscalls fail with EPERM, as they did when the filter was a deny
// list, so that a tool refused a privileged call says "Operation not
// permitted"; every other call not allowed gets ENOSYS. A name here the
// runtime's libseccomp does not know is skipped by it, and the call gets
// ENOSYS: refused either way.
var deniedSyscalls = []string{
	// namespaces and mounts (capabilities stop most; user namespaces need none)
	"unshare", "setns", "mount", "umount2", "pivot_root", "move_mount", "open_tree",
	"fsopen", "fsconfig", "fsmount", "fspick", "mount_setattr",
	// kernel modules, kexec, reboot, swap, accounting, quotas
	"init_module", "finit_module", "delete_module", "create_module", "query_module",
	"get_kernel_syms", "kexec_load", "kexec_file_load", "reboot", "swapon", "swapoff",
	"acct", "quotactl", "quotactl_fd", "nfsservctl",
	// clocks
	"settimeofday", "clock_settime", "clock_adjtime",
	// another process's fds (the agent's: a pidfd does not say whose it
	// is to a filter, and the agent opens one on itself)
	"pidfd_getfd",
	// keyrings, bpf, perf, io_uring, userfaultfd
	"add_key", "request_key", "keyctl", "bpf", "perf_event_open",
	"io_uring_setup", "io_uring_enter", "io_uring_register", "userfaultfd",
	// raw hardware and file handles
	"iopl", "ioperm", "open_by_handle_at", "name_to_handle_at",
	// NUMA policy of other processes, old and obscure interfaces
	"move_pages", "migrate_pages", "mbind", "set_mempolicy", "get_mempolicy",
	"lookup_dcookie", "sysfs", "_sysctl", "uselib", "ustat", "vhangup", "syslog",
	"fanotify_init", "kcmp",
	// newer than the first review, refused as Docker's profile refuses
	// them: the namespace lister, LSM attributes, the mount API's
	// open_tree_attr, advice to another process's memory, NUMA policy,
	// rseq slice yield, uprobe trampolines
	"listns", "lsm_get_self_attr", "lsm_set_self_attr", "lsm_list_modules", "open_tree_attr",
	"process_madvise", "set_mempolicy_home_node", "rseq_slice_yield", "uprobe",
}

// deniedSocketFamilies are the socket families below afMax that Docker's
// default profile (moby/profiles v0.3.0) does not allow, by number:
// AF_ALG (38, the kernel's crypto API, a large attack surface nothing in a
// sandbox needs) and AF_VSOCK (40: vsock is not confined by network
// namespaces, so a sandbox with network none could reach the host's, or
// other VMs', vsock listeners), and the families removed from the kernel
// or never implemented that older kernels still carry: AX25 3, IPX 4,
// APPLETALK 5, NETROM 6, ROSE 11, DECnet 12, ECONET 19, ATMSVC 20, IRDA 23,
// WANPIPE 25, ISDN 34, CAIF 37. Families from afMax up are refused as
// well (a future family is unreviewed attack surface).
var deniedSocketFamilies = []uint64{3, 4, 5, 6, 11, 12, 19, 20, 23, 25, 34, 37, 38, 40}

// afMax is one past the highest socket family this list was reviewed for.
const afMax = 46
