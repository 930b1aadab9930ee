/*
 * leoflow-sandbox: the one exec between the agent and a task (docs/security.md, "The sandbox").
 *
 * Built from this file with the machine's C compiler (packages/agent/native/build.mjs); nothing
 * prebuilt is ever downloaded. Node has no syscall for namespaces, mounts, keyrings, Landlock or
 * directory-fd-relative removal, and a chain of util-linux commands costs ~14 ms per spawn; this
 * sets the whole sandbox up in one exec of a small static program.
 *
 *   leoflow-sandbox probe
 *       one JSON line: can this process make namespaces and mounts, the Landlock ABI
 *   leoflow-sandbox run [options] -- FILE ARG...
 *       --uid N --gid N     run the task as this uid/gid, no supplementary groups
 *       --ns                own mount, IPC, PID (own /proc) and UTS namespaces
 *       --net-none          and an empty network namespace (only lo, up)
 *       --tmpfs DIR         a private tmpfs (nosuid,nodev, --tmpfs-size) on DIR
 *       --tmpfs-size BYTES  size cap of each private tmpfs (default 256 MiB)
 *       --bind DIR          DIR stays writable (nosuid,nodev); everything else is read-only
 *       --ro-bind SRC DST   SRC visible read-only at DST
 *       --mask PATH         PATH hidden (an empty read-only tmpfs, or /dev/null for a file)
 *       --chdir DIR         the task's working directory
 *       --status-file F     the task's exit status is recorded in F (created 0600 by root) by
 *                           the namespace's init; without --ns the task is exec'd in place and
 *                           its parent (the agent) has its status
 *       --nproc N           RLIMIT_NPROC of the task's uid
 *       --grace-ms N        after the task's leader exits, what is left gets SIGTERM, then
 *                           SIGKILL after N ms (default 5000)
 *       --landlock          scope abstract unix sockets and signals (Landlock ABI >= 6)
 *   leoflow-sandbox remove PATH
 *       removes PATH without ever following a link: openat/unlinkat relative to directory fds
 *       opened O_NOFOLLOW|O_DIRECTORY, never crossing a mount; as PATH's owner first (when it is
 *       not root), then what is left as the caller
 *   leoflow-sandbox sweep --uid N [--keep DIR]... DIR...
 *       as uid N: removes everything N owns under each DIR (no link followed, no mount crossed),
 *       strips setuid/setgid from files of N it cannot remove, removes N's System V IPC objects;
 *       inside a --keep DIR (an operator-listed writable path) it only strips set-id bits
 *   leoflow-sandbox clear-keyrings --uid N
 *       as uid N: clears its user, user-session and persistent keyrings
 *
 * Exit codes of `run`: the task's own (a task killed by a signal: this process dies by the same
 * signal); 120-127 are the sandbox's own failures before the task started, with one line on
 * stderr (120 usage, 121 namespaces/mounts, 122 privileges, 123 status file, 127 exec).
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <net/if.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/msg.h>
#include <sys/sem.h>
#include <sys/shm.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* Kernel interfaces declared here so the build needs no recent kernel headers. */
#ifndef SYS_mount_setattr
#define SYS_mount_setattr 442
#endif
#ifndef SYS_landlock_create_ruleset
#define SYS_landlock_create_ruleset 444
#endif
#ifndef SYS_landlock_restrict_self
#define SYS_landlock_restrict_self 446
#endif
#ifndef SYS_close_range
#define SYS_close_range 436
#endif
#ifndef SYS_keyctl
#define SYS_keyctl 250
#endif
#define LF_AT_RECURSIVE 0x8000
#define LF_MOUNT_ATTR_RDONLY 0x00000001
#define LF_MOUNT_ATTR_NOSUID 0x00000002
#define LF_MOUNT_ATTR_NODEV 0x00000004
struct lf_mount_attr {
  uint64_t attr_set, attr_clr, propagation, userns_fd;
};
#define LF_LANDLOCK_CREATE_RULESET_VERSION (1U << 0)
#define LF_LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET (1ULL << 0)
#define LF_LANDLOCK_SCOPE_SIGNAL (1ULL << 1)
struct lf_landlock_ruleset_attr {
  uint64_t handled_access_fs, handled_access_net, scoped;
};
#define LF_KEYCTL_JOIN_SESSION_KEYRING 1
#define LF_KEYCTL_CLEAR 7
#define LF_KEYCTL_GET_PERSISTENT 22
#define LF_KEY_SPEC_USER_KEYRING -4
#define LF_KEY_SPEC_USER_SESSION_KEYRING -5

#define MAX_LIST 64

static const char *prog = "leoflow-sandbox";

static void die(int code, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "%s: ", prog);
  vfprintf(stderr, fmt, ap);
  if (errno) fprintf(stderr, ": %s", strerror(errno));
  fputc('\n', stderr);
  va_end(ap);
  _exit(code);
}

static long parse_num(const char *s, const char *what) {
  char *end;
  errno = 0;
  long long v = strtoll(s, &end, 10);
  if (errno || *end || end == s || v < 0 || v > (long long)UINT32_MAX) {
    errno = 0;
    die(120, "%s: not a number: %s", what, s);
  }
  return (long)v;
}

static int landlock_abi(void) {
  long abi = syscall(SYS_landlock_create_ruleset, NULL, 0, LF_LANDLOCK_CREATE_RULESET_VERSION);
  return abi < 0 ? 0 : (int)abi;
}

/* ---------------------------------------------------------------- no-follow removal */

static const char *swap_name;   /* test hook: LEOFLOW_TEST_REMOVE_SWAP=name:target */
static const char *swap_target;
static int swapped;

/*
 * The test hook (armed only with LEOFLOW_TEST_FAULT_ARM=swap-subdir-for-symlink): once the
 * remover has opened the directory `name` and read its first entries, the directory is renamed
 * away and a symlink to `target` put in its place — what a racing task would do at the worst
 * moment. A remover that goes by path would now follow the link.
 */
static void test_swap(int parent, const char *name) {
  if (!swap_name || swapped || strcmp(name, swap_name) != 0) return;
  char away[NAME_MAX + 16];
  snprintf(away, sizeof away, "%s.swapped", name);
  if (renameat(parent, name, parent, away) == 0 && symlinkat(swap_target, parent, name) == 0)
    swapped = 1;
}

struct rm_ctx {
  dev_t dev;
  uid_t only_uid; /* sweep: remove only what this uid owns (everything inside its dirs) */
  int only;
  int left; /* entries of ours that could not be removed */
  int depth;
  /* sweep: operator-listed writable paths (by device and inode): kept, set-id bits stripped */
  dev_t keep_dev[MAX_LIST];
  ino_t keep_ino[MAX_LIST];
  int nkeep;
  int keeping;
};

static int is_kept(struct rm_ctx *c, const struct stat *st) {
  for (int i = 0; i < c->nkeep; i++)
    if (c->keep_dev[i] == st->st_dev && c->keep_ino[i] == st->st_ino) return 1;
  return 0;
}

static void strip_setid(int parent, const char *name, const struct stat *st) {
  if (!S_ISREG(st->st_mode) || !(st->st_mode & (S_ISUID | S_ISGID))) return;
  int fd = openat(parent, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
  if (fd >= 0) {
    fchmod(fd, st->st_mode & 0777);
    close(fd);
  }
}

#define MAX_DEPTH 512

/* Empties the directory open as `dfd` (closed here). */
static void empty_dir(int dfd, struct rm_ctx *c, int all);

/* Removes `name` in `parent`, never following a link; 1 when it was removed. */
static int remove_entry(int parent, const char *name, struct rm_ctx *c, int all) {
  struct stat st;
  if (fstatat(parent, name, &st, AT_SYMLINK_NOFOLLOW) != 0) return errno == ENOENT;
  int mine = all || !c->only || st.st_uid == c->only_uid;
  if (c->keeping) {
    /* inside an operator-listed writable path: nothing is removed, set-id bits go */
    if (mine && !S_ISDIR(st.st_mode)) strip_setid(parent, name, &st);
    if (!S_ISDIR(st.st_mode) || st.st_dev != c->dev || c->depth >= MAX_DEPTH) return 0;
    int fd = openat(parent, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) return 0;
    c->depth++;
    empty_dir(fd, c, 0);
    c->depth--;
    return 0;
  }
  if (S_ISDIR(st.st_mode) && c->only && is_kept(c, &st)) {
    int fd = openat(parent, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) return 0;
    c->keeping++;
    c->depth++;
    empty_dir(fd, c, 0);
    c->depth--;
    c->keeping--;
    return 0;
  }
  if (S_ISDIR(st.st_mode)) {
    if (st.st_dev != c->dev || c->depth >= MAX_DEPTH) {
      if (mine) c->left++; /* a mount point is never crossed */
      return 0;
    }
    if (mine && c->only) fchmodat(parent, name, 0700, 0); /* its owner may open it again */
    int fd = openat(parent, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) {
      if (mine) c->left++;
      return 0;
    }
    struct stat opened;
    if (fstat(fd, &opened) != 0 || opened.st_dev != st.st_dev || opened.st_ino != st.st_ino) {
      close(fd); /* swapped between the stat and the open: the next round looks again */
      return 0;
    }
    test_swap(parent, name);
    c->depth++;
    empty_dir(fd, c, mine);
    c->depth--;
    if (!mine) return 0;
    if (unlinkat(parent, name, AT_REMOVEDIR) == 0) return 1;
    /* ENOTDIR: a link stands there now (a swap): remove the link itself, never its target */
    if (errno == ENOTDIR && unlinkat(parent, name, 0) == 0) return 1;
    c->left++;
    return 0;
  }
  if (!mine) return 0;
  if (unlinkat(parent, name, 0) == 0) return 1;
  /* cannot remove it (another user's sticky dir): at least make a set-id bit inert */
  strip_setid(parent, name, &st);
  c->left++;
  return 0;
}

static void empty_dir(int dfd, struct rm_ctx *c, int all) {
  /* Rounds while anything goes: entries renamed in meanwhile (a swap) are found again. */
  for (int round = 0; round < 16; round++) {
    int dup = fcntl(dfd, F_DUPFD_CLOEXEC, 0);
    if (dup < 0) break;
    DIR *d = fdopendir(dup);
    if (!d) {
      close(dup);
      break;
    }
    rewinddir(d); /* the offset is shared with every dup of this fd */
    int left_before = c->left, removed = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
      if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
      removed += remove_entry(dfd, e->d_name, c, all);
    }
    closedir(d);
    if (removed == 0) break;
    c->left = left_before; /* counted again by the next round */
  }
  close(dfd);
}

static void drop_to(uid_t uid, gid_t gid) {
  if (geteuid() != 0 && geteuid() == uid) return; /* already that uid (a non-root worker) */
  if (setgroups(0, NULL) != 0 || setresgid(gid, gid, gid) != 0 || setresuid(uid, uid, uid) != 0)
    die(122, "cannot switch to uid %u", (unsigned)uid);
}

/* Splits PATH into an opened parent directory (no link in the last component) and a name. */
static int open_parent(const char *path, char *name, size_t cap) {
  char buf[PATH_MAX];
  if (strlen(path) >= sizeof buf || path[0] != '/') {
    errno = EINVAL;
    return -1;
  }
  strcpy(buf, path);
  size_t n = strlen(buf);
  while (n > 1 && buf[n - 1] == '/') buf[--n] = '\0';
  char *slash = strrchr(buf, '/');
  if (!slash || !slash[1] || strlen(slash + 1) >= cap) {
    errno = EINVAL;
    return -1;
  }
  snprintf(name, cap, "%s", slash + 1);
  if (slash == buf) slash[1] = '\0';
  else *slash = '\0';
  return open(buf, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
}

static int cmd_remove(int argc, char **argv) {
  if (argc != 1) die(120, "usage: remove PATH");
  char name[NAME_MAX + 1];
  int parent = open_parent(argv[0], name, sizeof name);
  if (parent < 0) die(1, "cannot open the parent of %s", argv[0]);
  struct stat st;
  if (fstatat(parent, name, &st, AT_SYMLINK_NOFOLLOW) != 0) return errno == ENOENT ? 0 : 1;
  if (!S_ISDIR(st.st_mode)) return unlinkat(parent, name, 0) == 0 ? 0 : 1;
  int fd = openat(parent, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return 1;
  struct rm_ctx c = {.dev = st.st_dev};
  if (geteuid() == 0 && st.st_uid != 0) {
    /* First as the tree's owner (the attempt's uid): it can touch nothing of anyone else. */
    pid_t pid = fork();
    if (pid == 0) {
      drop_to(st.st_uid, st.st_uid);
      empty_dir(fd, &c, 1);
      _exit(0);
    }
    int status;
    while (pid > 0 && waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
  }
  /* What the owner could not remove (another uid's files in a dir it opened to all). */
  c.left = 0;
  empty_dir(fd, &c, 1);
  if (unlinkat(parent, name, AT_REMOVEDIR) == 0) return 0;
  if (errno == ENOTDIR && unlinkat(parent, name, 0) == 0) return 0;
  fprintf(stderr, "%s: %s: %d entries not removed\n", prog, argv[0], c.left);
  return 1;
}

/* -------------------------------------------------------------------------- sweep */

static void remove_ipc_of(uid_t uid) {
  /* /proc/sysvipc/{shm,sem,msg}: key id perms ... uid is the 8th (shm), 5th (sem/msg) column */
  static const struct {
    const char *file;
    int uid_col, kind;
  } tabs[] = {{"/proc/sysvipc/shm", 7, 0}, {"/proc/sysvipc/sem", 4, 1}, {"/proc/sysvipc/msg", 7, 2}};
  for (size_t t = 0; t < sizeof tabs / sizeof tabs[0]; t++) {
    FILE *f = fopen(tabs[t].file, "re");
    if (!f) continue;
    char line[512];
    if (!fgets(line, sizeof line, f)) {
      fclose(f);
      continue;
    }
    while (fgets(line, sizeof line, f)) {
      long cols[16];
      int n = 0;
      char *save, *tok = strtok_r(line, " \t\n", &save);
      while (tok && n < 16) {
        cols[n++] = strtol(tok, NULL, 10);
        tok = strtok_r(NULL, " \t\n", &save);
      }
      if (n <= tabs[t].uid_col || (uid_t)cols[tabs[t].uid_col] != uid) continue;
      int id = (int)cols[1];
      if (tabs[t].kind == 0) shmctl(id, IPC_RMID, NULL);
      else if (tabs[t].kind == 1) semctl(id, 0, IPC_RMID);
      else msgctl(id, IPC_RMID, NULL);
    }
    fclose(f);
  }
}

static int cmd_sweep(int argc, char **argv) {
  long uid = -1;
  int i = 0;
  struct rm_ctx proto = {.only = 1};
  for (; i < argc; i++) {
    if (!strcmp(argv[i], "--uid") && i + 1 < argc) uid = parse_num(argv[++i], "--uid");
    else if (!strcmp(argv[i], "--keep") && i + 1 < argc) {
      struct stat st;
      if (stat(argv[++i], &st) == 0 && proto.nkeep < MAX_LIST) {
        proto.keep_dev[proto.nkeep] = st.st_dev;
        proto.keep_ino[proto.nkeep++] = st.st_ino;
      }
    } else break;
  }
  if (uid <= 0) die(120, "usage: sweep --uid N [--keep DIR]... DIR...");
  drop_to((uid_t)uid, (gid_t)uid);
  int left = 0;
  for (; i < argc; i++) {
    int fd = open(argv[i], O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) continue;
    struct stat st;
    if (fstat(fd, &st) != 0) {
      close(fd);
      continue;
    }
    struct rm_ctx c = proto;
    c.dev = st.st_dev;
    c.only_uid = (uid_t)uid;
    if (is_kept(&c, &st)) c.keeping = 1;
    empty_dir(fd, &c, !c.keeping && st.st_uid == (uid_t)uid);
    left += c.left;
  }
  remove_ipc_of((uid_t)uid);
  return left == 0 ? 0 : 3;
}

static int cmd_clear_keyrings(int argc, char **argv) {
  if (argc != 2 || strcmp(argv[0], "--uid") != 0) die(120, "usage: clear-keyrings --uid N");
  long uid = parse_num(argv[1], "--uid");
  drop_to((uid_t)uid, (gid_t)uid);
  int bad = 0;
  /* a fresh session first: the keyrings below are then found without touching any other */
  syscall(SYS_keyctl, LF_KEYCTL_JOIN_SESSION_KEYRING, NULL);
  if (syscall(SYS_keyctl, LF_KEYCTL_CLEAR, LF_KEY_SPEC_USER_KEYRING) != 0) bad++;
  if (syscall(SYS_keyctl, LF_KEYCTL_CLEAR, LF_KEY_SPEC_USER_SESSION_KEYRING) != 0) bad++;
  long persistent = syscall(SYS_keyctl, LF_KEYCTL_GET_PERSISTENT, (uid_t)-1, -3 /* @s */);
  if (persistent > 0) syscall(SYS_keyctl, LF_KEYCTL_CLEAR, persistent);
  return bad ? 1 : 0;
}

/* ---------------------------------------------------------------------------- run */

struct run_opts {
  long uid, gid;
  int ns, net_none, landlock;
  const char *tmpfs[MAX_LIST];
  int ntmpfs;
  const char *bind[MAX_LIST];
  int nbind;
  const char *ro_src[MAX_LIST], *ro_dst[MAX_LIST];
  int nro;
  const char *mask[MAX_LIST];
  int nmask;
  const char *chdir_to;
  const char *status_file;
  long tmpfs_size;
  long nproc;
  long grace_ms;
  char **argv;
};

static int mount_setattr_(int dfd, const char *path, unsigned flags, uint64_t set, uint64_t clr) {
  struct lf_mount_attr a = {.attr_set = set, .attr_clr = clr};
  return (int)syscall(SYS_mount_setattr, dfd, path, flags, &a, sizeof a);
}

/* mkdir -p inside the sandbox (only under a fresh tmpfs does anything need creating) */
static void mkdirs(const char *path, mode_t mode) {
  char buf[PATH_MAX];
  snprintf(buf, sizeof buf, "%s", path);
  for (char *p = buf + 1; *p; p++) {
    if (*p != '/') continue;
    *p = '\0';
    mkdir(buf, 0755);
    *p = '/';
  }
  mkdir(buf, mode);
}

/* A source opened before anything is mounted over it, named through /proc/self/fd. */
static void fd_path(char *buf, size_t cap, int fd, const char *name) {
  if (name) snprintf(buf, cap, "/proc/self/fd/%d/%s", fd, name);
  else snprintf(buf, cap, "/proc/self/fd/%d", fd);
}

/*
 * /dev as systemd's PrivateDevices: a fresh tmpfs with null, zero, full, random, urandom and tty
 * bound from the host, a private devpts, /dev/shm (a private tmpfs, mounted with the others)
 * and the usual links.
 */
static void private_dev(void) {
  int host = open("/dev", O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (host < 0) die(121, "open /dev");
  if (mount("tmpfs", "/dev", "tmpfs", MS_NOSUID | MS_NOEXEC, "mode=0755,size=64k") != 0)
    die(121, "mount /dev tmpfs");
  static const char *nodes[] = {"null", "zero", "full", "random", "urandom", "tty"};
  for (size_t i = 0; i < sizeof nodes / sizeof nodes[0]; i++) {
    char src[PATH_MAX], dst[64];
    fd_path(src, sizeof src, host, nodes[i]);
    snprintf(dst, sizeof dst, "/dev/%s", nodes[i]);
    int fd = open(dst, O_CREAT | O_WRONLY | O_CLOEXEC, 0666);
    if (fd >= 0) close(fd);
    if (mount(src, dst, NULL, MS_BIND, NULL) != 0) die(121, "bind /dev/%s", nodes[i]);
  }
  close(host);
  mkdir("/dev/pts", 0755);
  mkdir("/dev/shm", 01777);
  if (mount("devpts", "/dev/pts", "devpts", MS_NOSUID | MS_NOEXEC,
            "newinstance,ptmxmode=0666,mode=620") != 0)
    die(121, "mount devpts");
  symlink("pts/ptmx", "/dev/ptmx");
  symlink("/proc/self/fd", "/dev/fd");
  symlink("/proc/self/fd/0", "/dev/stdin");
  symlink("/proc/self/fd/1", "/dev/stdout");
  symlink("/proc/self/fd/2", "/dev/stderr");
}

static void lo_up(void) {
  int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (s < 0) return;
  struct ifreq r;
  memset(&r, 0, sizeof r);
  strncpy(r.ifr_name, "lo", IFNAMSIZ - 1);
  if (ioctl(s, SIOCGIFFLAGS, &r) == 0) {
    r.ifr_flags |= IFF_UP | IFF_RUNNING;
    ioctl(s, SIOCSIFFLAGS, &r);
  }
  close(s);
}

static int is_dir(const char *p) {
  struct stat st;
  return stat(p, &st) == 0 && S_ISDIR(st.st_mode);
}

/* Every mount of the new namespace: read-only, private, nosuid; then the writable places. */
static void build_mounts(struct run_opts *o) {
  char opts[96], src[PATH_MAX];
  /* Sources first: a private tmpfs mounted below may cover them (a work dir under /tmp). */
  int bind_fd[MAX_LIST], ro_fd[MAX_LIST];
  for (int i = 0; i < o->nbind; i++) {
    bind_fd[i] = open(o->bind[i], O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (bind_fd[i] < 0) die(121, "open %s", o->bind[i]);
  }
  for (int i = 0; i < o->nro; i++) ro_fd[i] = open(o->ro_src[i], O_PATH | O_CLOEXEC);
  if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0) die(121, "make / private");
  if (mount_setattr_(AT_FDCWD, "/", LF_AT_RECURSIVE, LF_MOUNT_ATTR_RDONLY | LF_MOUNT_ATTR_NOSUID,
                     0) != 0)
    die(121, "make every mount read-only");
  private_dev();
  snprintf(opts, sizeof opts, "mode=1777,size=%ld", o->tmpfs_size);
  for (int i = 0; i < o->ntmpfs; i++) {
    if (!is_dir(o->tmpfs[i])) continue;
    if (mount("tmpfs", o->tmpfs[i], "tmpfs", MS_NOSUID | MS_NODEV, opts) != 0)
      die(121, "mount a private tmpfs on %s", o->tmpfs[i]);
  }
  for (int i = 0; i < o->nro; i++) {
    if (ro_fd[i] < 0) continue;
    struct stat st;
    if (fstat(ro_fd[i], &st) != 0) continue;
    if (S_ISDIR(st.st_mode)) mkdirs(o->ro_dst[i], 0755);
    fd_path(src, sizeof src, ro_fd[i], NULL);
    if (mount(src, o->ro_dst[i], NULL, MS_BIND | MS_REC, NULL) != 0)
      die(121, "bind %s", o->ro_src[i]);
    if (mount_setattr_(AT_FDCWD, o->ro_dst[i], LF_AT_RECURSIVE,
                       LF_MOUNT_ATTR_RDONLY | LF_MOUNT_ATTR_NOSUID | LF_MOUNT_ATTR_NODEV, 0) != 0)
      die(121, "make %s read-only", o->ro_dst[i]);
    close(ro_fd[i]);
  }
  for (int i = 0; i < o->nbind; i++) {
    /* under a private tmpfs the path does not exist any more: made again, root-only */
    if (!is_dir(o->bind[i])) mkdirs(o->bind[i], 0700);
    fd_path(src, sizeof src, bind_fd[i], NULL);
    if (mount(src, o->bind[i], NULL, MS_BIND, NULL) != 0) die(121, "bind %s", o->bind[i]);
    if (mount_setattr_(AT_FDCWD, o->bind[i], 0, LF_MOUNT_ATTR_NOSUID | LF_MOUNT_ATTR_NODEV,
                       LF_MOUNT_ATTR_RDONLY) != 0)
      die(121, "make %s writable", o->bind[i]);
    close(bind_fd[i]);
  }
  for (int i = 0; i < o->nmask; i++) {
    struct stat st;
    if (lstat(o->mask[i], &st) != 0) continue;
    int r = S_ISDIR(st.st_mode)
                ? mount("tmpfs", o->mask[i], "tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC,
                        "mode=0755,size=4k")
                : mount("/dev/null", o->mask[i], NULL, MS_BIND, NULL);
    if (r != 0) die(121, "mask %s", o->mask[i]);
  }
}

static volatile sig_atomic_t forward_to = 0;
static void forward(int sig) {
  if (forward_to) kill(forward_to, sig);
}

static int status_fd = -1;
static int reporter_fd = -1; /* pid 1 → the outer process: the task's wait status */

static void record(int status) {
  if (status_fd < 0) return;
  char buf[96];
  int n = WIFEXITED(status)
              ? snprintf(buf, sizeof buf, "{\"exit_code\":%d}\n", WEXITSTATUS(status))
              : snprintf(buf, sizeof buf, "{\"signal\":%d}\n", WTERMSIG(status));
  if (ftruncate(status_fd, 0) == 0 && pwrite(status_fd, buf, (size_t)n, 0) == n) fsync(status_fd);
}

static void mirror(int status) {
  if (WIFEXITED(status)) _exit(WEXITSTATUS(status));
  int sig = WTERMSIG(status);
  signal(sig, SIG_DFL);
  sigset_t s;
  sigemptyset(&s);
  sigaddset(&s, sig);
  sigprocmask(SIG_UNBLOCK, &s, NULL);
  prctl(PR_SET_DUMPABLE, 0);
  struct rlimit no_core = {0, 0};
  setrlimit(RLIMIT_CORE, &no_core);
  kill(getpid(), sig);
  _exit(128 + sig);
}

static long now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1000L + t.tv_nsec / 1000000L;
}

/* The task's own process: drop everything, then exec. Never returns. */
static void become_task(struct run_opts *o) {
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, NULL);
  for (int s = 1; s < NSIG; s++) signal(s, SIG_DFL);
  if (o->nproc > 0) {
    struct rlimit r = {(rlim_t)o->nproc, (rlim_t)o->nproc};
    if (setrlimit(RLIMIT_NPROC, &r) != 0) die(122, "RLIMIT_NPROC");
  }
  /* as root, like a spawn's cwd: the work dir's parents need not be traversable by the uid */
  if (o->chdir_to && chdir(o->chdir_to) != 0) die(127, "chdir %s", o->chdir_to);
  if (o->uid >= 0) drop_to((uid_t)o->uid, (gid_t)o->gid);
  /* a session keyring of its own: nothing the agent's session holds is in reach */
  syscall(SYS_keyctl, LF_KEYCTL_JOIN_SESSION_KEYRING, NULL);
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) die(122, "no_new_privs");
  if (o->landlock && landlock_abi() >= 6) {
    struct lf_landlock_ruleset_attr a = {
        .scoped = LF_LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET | LF_LANDLOCK_SCOPE_SIGNAL};
    int rs = (int)syscall(SYS_landlock_create_ruleset, &a, sizeof a, 0);
    if (rs < 0 || syscall(SYS_landlock_restrict_self, rs, 0) != 0) die(122, "landlock");
    close(rs);
  }
  /* only 0-2: whatever this process inherited (the control plane's own fds included) is closed */
  if (syscall(SYS_close_range, 3, ~0U, 0) != 0) {
    for (int fd = 3; fd < 65536; fd++) close(fd);
  }
  execvp(o->argv[0], o->argv);
  int e = errno;
  fprintf(stderr, "%s: cannot execute %s: %s\n", prog, o->argv[0], strerror(e));
  _exit(e == ENOENT ? 127 : 126);
}

/* Waits for `task`, reaping every other child; then gives what is left a grace. */
static int reap(pid_t task, struct run_opts *o, int is_init) {
  int status = 0, task_status = -1;
  for (;;) {
    pid_t p = waitpid(-1, &status, 0);
    if (p < 0) {
      if (errno == EINTR) continue;
      break; /* no children left */
    }
    if (p == task) {
      task_status = status;
      break;
    }
  }
  forward_to = 0;
  if (is_init) {
    /* pid 1: whatever the task left behind gets SIGTERM, then dies with the namespace */
    if (kill(-1, SIGTERM) == 0) {
      long deadline = now_ms() + o->grace_ms;
      while (now_ms() < deadline) {
        pid_t p = waitpid(-1, &status, WNOHANG);
        if (p < 0 && errno == ECHILD) break;
        if (p <= 0) usleep(10000);
      }
    }
  }
  return task_status;
}

static void cmd_run(struct run_opts *o) {
  if (o->status_file) {
    status_fd = open(o->status_file, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (status_fd < 0) die(123, "open the status file %s", o->status_file);
  }
  /* Nothing of this root process is for the task to inspect (it cannot: another uid). */
  prctl(PR_SET_DUMPABLE, 0);
  if (o->ns) {
    int flags = CLONE_NEWNS | CLONE_NEWIPC | CLONE_NEWPID | CLONE_NEWUTS;
    if (o->net_none) flags |= CLONE_NEWNET;
    if (unshare(flags) != 0) die(121, "unshare namespaces");
    if (o->net_none) lo_up();
  }
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = forward;
  for (int s = 0, sigs[] = {SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2};
       s < (int)(sizeof sigs / sizeof sigs[0]); s++)
    sigaction(sigs[s], &sa, NULL);

  if (!o->ns) {
    /*
     * No namespace (the per-uid fallback): the task is this process, exec'd in place, so its
     * parent is the agent itself, which reaps it and reports its status; no reaper in between.
     */
    if (status_fd >= 0) close(status_fd);
    become_task(o);
  }

  /*
   * The first child is pid 1 of the new PID namespace: it mounts, forks the task and reaps. It
   * cannot die by the task's signal itself (pid 1 ignores it), so it hands the task's raw wait
   * status back on a pipe, and this process dies the way the task did.
   */
  int back[2];
  if (pipe2(back, O_CLOEXEC) != 0) die(121, "pipe");
  pid_t init = fork();
  if (init < 0) die(121, "fork");
  if (init > 0) {
    close(back[1]);
    if (status_fd >= 0) close(status_fd); /* the reaper writes it */
    status_fd = -1;
    forward_to = init;
    int st, task_st;
    while (waitpid(init, &st, 0) < 0 && errno == EINTR) {
    }
    if (read(back[0], &task_st, sizeof task_st) == (ssize_t)sizeof task_st) mirror(task_st);
    mirror(st);
  }
  close(back[0]);
  reporter_fd = back[1];
  /* pid 1 */
  prctl(PR_SET_PDEATHSIG, SIGKILL); /* the outer process is killed: so is the namespace */
  build_mounts(o);
  if (mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) != 0)
    die(121, "mount /proc");
  /* the kernel's tunables stay read-only (systemd's ProtectKernelTunables) */
  static const char *tunables[] = {"/proc/sys", "/proc/sysrq-trigger"};
  for (size_t i = 0; i < sizeof tunables / sizeof tunables[0]; i++) {
    if (mount(tunables[i], tunables[i], NULL, MS_BIND, NULL) == 0)
      mount_setattr_(AT_FDCWD, tunables[i], 0, LF_MOUNT_ATTR_RDONLY | LF_MOUNT_ATTR_NOSUID, 0);
  }
  /* /dev is built: nothing more is written there */
  mount_setattr_(AT_FDCWD, "/dev", 0, LF_MOUNT_ATTR_RDONLY, 0);
  pid_t task = fork();
  if (task < 0) die(121, "fork");
  if (task == 0) become_task(o);
  forward_to = task;
  /* pid 1 forwards what its parent sends (the kernel drops signals it has no handler for) */
  int st = reap(task, o, 1);
  record(st);
  if (write(reporter_fd, &st, sizeof st) != (ssize_t)sizeof st) { /* the outer is gone */
  }
  mirror(st);
}

static void parse_run(int argc, char **argv, struct run_opts *o) {
  memset(o, 0, sizeof *o);
  o->uid = o->gid = -1;
  o->tmpfs_size = 256L * 1024 * 1024;
  o->grace_ms = 5000;
  int i = 0;
#define NEED(n)                                                     \
  do {                                                              \
    if (i + (n) >= argc) die(120, "%s needs a value", argv[i]);     \
  } while (0)
#define LIST(arr, cnt)                                              \
  do {                                                              \
    NEED(1);                                                        \
    if ((cnt) >= MAX_LIST) die(120, "too many %s", argv[i]);        \
    arr[(cnt)++] = argv[++i];                                       \
  } while (0)
  for (; i < argc; i++) {
    const char *a = argv[i];
    if (!strcmp(a, "--")) {
      i++;
      break;
    } else if (!strcmp(a, "--uid")) {
      NEED(1);
      o->uid = parse_num(argv[++i], a);
    } else if (!strcmp(a, "--gid")) {
      NEED(1);
      o->gid = parse_num(argv[++i], a);
    } else if (!strcmp(a, "--ns")) o->ns = 1;
    else if (!strcmp(a, "--net-none")) o->net_none = 1;
    else if (!strcmp(a, "--landlock")) o->landlock = 1;
    else if (!strcmp(a, "--tmpfs")) LIST(o->tmpfs, o->ntmpfs);
    else if (!strcmp(a, "--bind")) LIST(o->bind, o->nbind);
    else if (!strcmp(a, "--mask")) LIST(o->mask, o->nmask);
    else if (!strcmp(a, "--ro-bind")) {
      NEED(2);
      if (o->nro >= MAX_LIST) die(120, "too many --ro-bind");
      o->ro_src[o->nro] = argv[++i];
      o->ro_dst[o->nro++] = argv[++i];
    } else if (!strcmp(a, "--tmpfs-size")) {
      NEED(1);
      o->tmpfs_size = parse_num(argv[++i], a);
    } else if (!strcmp(a, "--chdir")) {
      NEED(1);
      o->chdir_to = argv[++i];
    } else if (!strcmp(a, "--status-file")) {
      NEED(1);
      o->status_file = argv[++i];
    } else if (!strcmp(a, "--nproc")) {
      NEED(1);
      o->nproc = parse_num(argv[++i], a);
    } else if (!strcmp(a, "--grace-ms")) {
      NEED(1);
      o->grace_ms = parse_num(argv[++i], a);
    } else die(120, "unknown option %s", a);
  }
  if (i >= argc) die(120, "usage: run [options] -- FILE ARG...");
  if ((o->uid < 0) != (o->gid < 0)) die(120, "--uid and --gid go together");
  if (o->tmpfs_size < 65536) die(120, "--tmpfs-size below 64 KiB");
  o->argv = argv + i;
}

/*
 * World-writable directories on this host: where a task could leave something for a later
 * attempt. Breadth-first from /, to depth 6, every filesystem (so /dev/shm and /dev/mqueue are
 * found) except /proc and /sys; /usr (distribution files) and node_modules/.git trees are
 * skipped, and nothing below a found directory is looked at (its tmpfs covers it).
 */
#define SCAN_MAX 60000
static void scan_world_writable(void) {
  static char *queue[SCAN_MAX];
  static int depth[SCAN_MAX];
  int head = 0, tail = 0, first = 1, visited = 0;
  queue[tail] = strdup("/");
  depth[tail++] = 0;
  printf("\"world_writable\":[");
  while (head < tail) {
    char *dir = queue[head];
    int d = depth[head++];
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) {
      free(dir);
      continue;
    }
    DIR *dp = fdopendir(fd);
    if (!dp) {
      close(fd);
      free(dir);
      continue;
    }
    struct dirent *e;
    while ((e = readdir(dp)) != NULL) {
      if (e->d_name[0] == '.' && (!e->d_name[1] || (e->d_name[1] == '.' && !e->d_name[2])))
        continue;
      if (e->d_type != DT_DIR && e->d_type != DT_UNKNOWN) continue;
      char path[PATH_MAX];
      snprintf(path, sizeof path, "%s%s%s", dir, strcmp(dir, "/") ? "/" : "", e->d_name);
      if (!strcmp(path, "/proc") || !strcmp(path, "/sys") || !strcmp(path, "/usr") ||
          !strcmp(e->d_name, "node_modules") || !strcmp(e->d_name, ".git"))
        continue;
      struct stat st;
      if (fstatat(dirfd(dp), e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISDIR(st.st_mode))
        continue;
      visited++;
      if (st.st_mode & S_IWOTH) {
        printf("%s\"", first ? "" : ",");
        for (const char *c = path; *c; c++) {
          if (*c == '"' || *c == '\\') putchar('\\');
          if ((unsigned char)*c < 0x20) printf("\\u%04x", *c);
          else putchar(*c);
        }
        putchar('"');
        first = 0;
        continue;
      }
      if (d + 1 < 6 && tail < SCAN_MAX) {
        queue[tail] = strdup(path);
        depth[tail++] = d + 1;
      }
    }
    closedir(dp);
    free(dir);
  }
  while (head < tail) free(queue[head++]);
  printf("],\"scan_complete\":%s,", tail < SCAN_MAX ? "true" : "false");
  (void)visited;
}

static int cmd_probe(int scan) {
  /* A child tries what `run --ns` needs; this process stays as it was. */
  const char *why = "";
  int ok = 0;
  pid_t pid = fork();
  if (pid == 0) {
    if (unshare(CLONE_NEWNS | CLONE_NEWIPC | CLONE_NEWPID | CLONE_NEWUTS) != 0) _exit(10);
    if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0) _exit(11);
    if (mount("tmpfs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, "size=64k") != 0) _exit(12);
    if (mount_setattr_(AT_FDCWD, "/", LF_AT_RECURSIVE, LF_MOUNT_ATTR_RDONLY, 0) != 0) _exit(13);
    pid_t init = fork();
    if (init == 0) _exit(mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV, NULL) == 0 ? 0 : 14);
    int st;
    waitpid(init, &st, 0);
    _exit(WIFEXITED(st) ? WEXITSTATUS(st) : 15);
  }
  int st = 0;
  if (pid < 0 || waitpid(pid, &st, 0) < 0) why = "fork failed";
  else if (WIFEXITED(st) && WEXITSTATUS(st) == 0) ok = 1;
  else {
    int c = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    why = c == 10   ? "unshare(mount, IPC, PID, UTS namespaces) refused (no CAP_SYS_ADMIN here)"
          : c == 11 ? "mount propagation cannot be changed"
          : c == 12 ? "tmpfs cannot be mounted"
          : c == 13 ? "mount_setattr (Linux >= 5.12) refused"
          : c == 14 ? "/proc cannot be mounted in a new PID namespace"
                    : "the probe failed";
  }
  printf("{");
  if (scan) scan_world_writable();
  printf("\"namespaces\":%s,\"why\":\"%s\",\"landlock_abi\":%d,\"uid\":%u}\n",
         ok ? "true" : "false", why, landlock_abi(), (unsigned)geteuid());
  return 0;
}

int main(int argc, char **argv) {
  if (argc < 2) die(120, "usage: probe | run | remove | sweep | clear-keyrings");
  const char *cmd = argv[1];
  if (!strcmp(cmd, "probe")) return cmd_probe(argc > 2 && !strcmp(argv[2], "--world-writable"));
  const char *hook = getenv("LEOFLOW_TEST_REMOVE_SWAP");
  const char *arm = getenv("LEOFLOW_TEST_FAULT_ARM");
  if (hook && arm && !strcmp(arm, "swap-subdir-for-symlink")) {
    static char buf[PATH_MAX];
    snprintf(buf, sizeof buf, "%s", hook);
    char *colon = strchr(buf, ':');
    if (colon) {
      *colon = '\0';
      swap_name = buf;
      swap_target = colon + 1;
    }
  }
  if (!strcmp(cmd, "remove")) return cmd_remove(argc - 2, argv + 2);
  if (!strcmp(cmd, "sweep")) return cmd_sweep(argc - 2, argv + 2);
  if (!strcmp(cmd, "clear-keyrings")) return cmd_clear_keyrings(argc - 2, argv + 2);
  if (!strcmp(cmd, "run")) {
    struct run_opts o;
    parse_run(argc - 2, argv + 2, &o);
    cmd_run(&o);
    return 125;
  }
  die(120, "unknown command %s", cmd);
  return 120;
}
