#include "core/file.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

bp_status bp_read_stream(FILE *f, bp_bytes *out, bp_err *err) {
    size_t cap = 1 << 16, n = 0;
    uint8_t *buf = malloc(cap);
    if (!buf) return bp_fail(err, BP_ENOMEM, "cannot allocate a read buffer");
    for (;;) {
        if (n == cap) {
            uint8_t *bigger = realloc(buf, cap * 2);
            if (!bigger) {
                free(buf);
                return bp_fail(err, BP_ENOMEM, "cannot allocate %zu bytes to read a file", cap * 2);
            }
            buf = bigger;
            cap *= 2;
        }
        size_t got = fread(buf + n, 1, cap - n, f);
        n += got;
        if (got == 0) break;
    }
    if (ferror(f)) {
        free(buf);
        return bp_fail(err, BP_EIO, "read error: %s", strerror(errno));
    }
    out->data = buf;
    out->n = n;
    return BP_OK;
}

/* Opened without blocking (a FIFO would wait for a writer forever), then refused
 * unless it is a regular file: a device such as /dev/zero never ends. */
static bp_status open_regular(const char *path, int *fd, bp_err *err) {
    *fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (*fd < 0) return bp_fail(err, BP_EIO, "cannot open %s: %s", path, strerror(errno));
    struct stat st;
    if (fstat(*fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(*fd);
        *fd = -1;
        return bp_fail(err, BP_EIO, "%s is not a regular file", path);
    }
    fcntl(*fd, F_SETFL, fcntl(*fd, F_GETFL) & ~O_NONBLOCK);
    return BP_OK;
}

bp_status bp_check_regular(const char *path, bp_err *err) {
    int fd, rc = open_regular(path, &fd, err);
    if (rc == BP_OK) close(fd);
    return rc;
}

bp_status bp_fopen_regular(const char *path, FILE **f, bp_err *err) {
    int fd, rc = open_regular(path, &fd, err);
    if (rc) return rc;
    if ((*f = fdopen(fd, "rb"))) return BP_OK;
    close(fd);
    return bp_fail(err, BP_EIO, "cannot open %s: %s", path, strerror(errno));
}

bp_status bp_read_file(const char *path, bp_bytes *out, bp_err *err) {
    FILE *f = NULL;
    bp_status rc = bp_fopen_regular(path, &f, err);
    if (rc) return rc;
    rc = bp_read_stream(f, out, err);
    fclose(f);
    if (rc) return bp_err_context(err, "%s", path);
    return BP_OK;
}

static int write_all(int fd, const void *data, size_t n) {
    const uint8_t *p = data;
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return -1;
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

/* Whether the regular file behind fd starts with magic. */
static bool starts_with(int fd, const char *magic) {
    char head[128];
    size_t n = strlen(magic), got = 0;
    if (n > sizeof head) return false;
    while (got < n) {
        ssize_t k = read(fd, head + got, n - got);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) break;
        got += (size_t)k;
    }
    return got == n && memcmp(head, magic, n) == 0;
}

/* The folder of path into dir ("." for a bare name); false when it does not fit. */
static bool folder_of(const char *path, char *dir, size_t n) {
    if ((size_t)snprintf(dir, n, "%s", path) >= n) return false;
    char *slash = strrchr(dir, '/');
    if (slash == dir) dir[1] = '\0';
    else if (slash) *slash = '\0';
    else snprintf(dir, n, ".");
    return true;
}

/* A file renamed into place needs its folder to exist and take new files. */
static bp_status check_folder(const char *path, bp_err *err) {
    char dir[BP_PATH_MAX];
    if (!folder_of(path, dir, sizeof dir))
        return bp_fail(err, BP_EUSAGE, "%s is too long a path", path);
    if (access(dir, W_OK | X_OK) == 0) return BP_OK;
    return bp_fail(err, BP_EUSAGE, "cannot write %s: its folder %s: %s", path, dir, strerror(errno));
}

bp_status bp_check_output(const char *path, const bp_output_kind *kind, bp_err *err) {
    struct stat st;
    if (!path[0]) return bp_fail(err, BP_EUSAGE, "an empty name; give a file name");
    if (stat(path, &st) != 0) {
        /* a new name (or a dangling link, replaced) */
        if (errno == ENOENT) return kind->in_place ? BP_OK : check_folder(path, err);
        return bp_fail(err, BP_EUSAGE, "cannot use %s: %s", path, strerror(errno));
    }
    if (S_ISDIR(st.st_mode))
        return bp_fail(err, BP_EUSAGE, "%s is a directory; give a file name", path);
    if (!S_ISREG(st.st_mode)) {
        if (kind->in_place) return BP_OK; /* a FIFO or device is written to, never replaced */
        return bp_fail(err, BP_EUSAGE,
                       "%s is not a regular file (a device, FIFO or socket), which the %s "
                       "would replace; give a file name",
                       path, kind->name);
    }
    if (st.st_size == 0) return kind->in_place ? BP_OK : check_folder(path, err);
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) return bp_fail(err, BP_EUSAGE, "cannot read %s: %s", path, strerror(errno));
    bool same_kind = starts_with(fd, kind->magic);
    close(fd);
    if (same_kind) return kind->in_place ? BP_OK : check_folder(path, err);
    return bp_fail(err, BP_EUSAGE, "%s exists and is not a %s; give a new name or remove it",
                   path, kind->name);
}

/* The identity of a path that may not exist yet: its folder's real path and its
 * last component (two spellings of one file compare equal). */
static bool canonical(const char *path, char *out, size_t n) {
    char dir[BP_PATH_MAX];
    if (!folder_of(path, dir, sizeof dir)) return false;
    const char *slash = strrchr(path, '/');
    const char *base = slash ? slash + 1 : path;
    char real[PATH_MAX];
    if (!realpath(dir, real)) return false;
    return (size_t)snprintf(out, n, "%s/%s", real, base) < n;
}

bool bp_same_path(const char *a, const char *b) {
    struct stat sa, sb;
    if (stat(a, &sa) == 0 && stat(b, &sb) == 0)
        return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
    char ca[BP_PATH_MAX + 256], cb[BP_PATH_MAX + 256];
    if (canonical(a, ca, sizeof ca) && canonical(b, cb, sizeof cb)) return strcmp(ca, cb) == 0;
    return strcmp(a, b) == 0;
}

/* The pid of name when it is base + ".tmp." + digits; 0 otherwise. */
static long temp_pid(const char *name, const char *base, size_t len) {
    if (strncmp(name, base, len) != 0 || strncmp(name + len, ".tmp.", 5) != 0) return 0;
    char *end;
    long pid = strtol(name + len + 5, &end, 10);
    return *end == '\0' && pid > 0 ? pid : 0;
}

void bp_remove_stale_temps(const char *path) {
    char dir[BP_PATH_MAX];
    if (!folder_of(path, dir, sizeof dir)) return;
    const char *slash = strrchr(path, '/'), *base = slash ? slash + 1 : path;
    size_t len = strlen(base);
    DIR *d = opendir(dir);
    for (struct dirent *e; d && (e = readdir(d));) {
        long pid = temp_pid(e->d_name, base, len);
        /* ESRCH: no such process; EPERM means one runs, of another user. */
        if (pid && pid != (long)getpid() && kill((pid_t)pid, 0) != 0 && errno == ESRCH)
            unlinkat(dirfd(d), e->d_name, 0);
    }
    if (d) closedir(d);
}

bp_status bp_write_parts_atomic(const char *path, const bp_iovec *parts, int n_parts, bp_err *err) {
    char tmp[4096];
    bp_remove_stale_temps(path);
    /* rename() would put a regular file in place of a device or a FIFO. */
    struct stat st;
    if (stat(path, &st) == 0 && !S_ISREG(st.st_mode))
        return bp_fail(err, BP_EIO, "cannot write %s: not a regular file", path);
    if ((size_t)snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid()) >= sizeof tmp)
        return bp_fail(err, BP_EUSAGE, "path too long: %s", path);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) return bp_fail(err, BP_EIO, "cannot create %s: %s", tmp, strerror(errno));
    int bad = 0;
    for (int i = 0; i < n_parts && !bad; i++) bad = write_all(fd, parts[i].data, parts[i].n);
    if (!bad) bad = fsync(fd);
    int saved = errno;
    if (close(fd) != 0 && !bad) {
        bad = 1;
        saved = errno;
    }
    if (!bad && rename(tmp, path) != 0) {
        bad = 1;
        saved = errno;
    }
    if (bad) {
        unlink(tmp);
        return bp_fail(err, BP_EIO, "cannot write %s: %s", path, strerror(saved));
    }
    return BP_OK;
}

bp_status bp_write_file_atomic(const char *path, const void *data, size_t n, bp_err *err) {
    bp_iovec part = {data, n};
    return bp_write_parts_atomic(path, &part, 1, err);
}

bp_status bp_path_join(char *out, size_t n, const char *dir, const char *name, bp_err *err) {
    size_t a = strlen(dir), b = strlen(name);
    if (a + b + 2 > n) return bp_fail(err, BP_EUSAGE, "path too long: %s/%s", dir, name);
    memcpy(out, dir, a);
    out[a] = '/';
    memcpy(out + a + 1, name, b + 1);
    return BP_OK;
}

bp_status bp_mkdir_p(const char *path, bp_err *err) {
    char buf[4096];
    if ((size_t)snprintf(buf, sizeof buf, "%s", path) >= sizeof buf)
        return bp_fail(err, BP_EUSAGE, "path too long: %s", path);
    for (char *p = buf + 1;; p++) {
        char c = *p;
        if (c != '/' && c != '\0') continue;
        *p = '\0';
        if (mkdir(buf, 0755) != 0 && errno != EEXIST)
            return bp_fail(err, BP_EIO, "cannot create directory %s: %s", buf, strerror(errno));
        *p = c;
        if (c == '\0') break;
    }
    struct stat st;
    if (stat(path, &st) != 0 || !S_ISDIR(st.st_mode))
        return bp_fail(err, BP_EIO, "%s exists and is not a directory", path);
    return BP_OK;
}

int bp_path_exists(const char *path) {
    struct stat st;
    return stat(path, &st) == 0;
}
