#include "core/file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int bp_read_stream(FILE *f, bp_bytes *out, bp_err *err) {
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
static int open_regular(const char *path, int *fd, bp_err *err) {
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

int bp_check_regular(const char *path, bp_err *err) {
    int fd, rc = open_regular(path, &fd, err);
    if (rc == BP_OK) close(fd);
    return rc;
}

int bp_fopen_regular(const char *path, FILE **f, bp_err *err) {
    int fd, rc = open_regular(path, &fd, err);
    if (rc) return rc;
    if ((*f = fdopen(fd, "rb"))) return BP_OK;
    close(fd);
    return bp_fail(err, BP_EIO, "cannot open %s: %s", path, strerror(errno));
}

int bp_read_file(const char *path, bp_bytes *out, bp_err *err) {
    FILE *f = NULL;
    int rc = bp_fopen_regular(path, &f, err);
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

int bp_write_parts_atomic(const char *path, const bp_iovec *parts, int n_parts, bp_err *err) {
    char tmp[4096];
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

int bp_write_file_atomic(const char *path, const void *data, size_t n, bp_err *err) {
    bp_iovec part = {data, n};
    return bp_write_parts_atomic(path, &part, 1, err);
}

int bp_path_join(char *out, size_t n, const char *dir, const char *name, bp_err *err) {
    size_t a = strlen(dir), b = strlen(name);
    if (a + b + 2 > n) return bp_fail(err, BP_EUSAGE, "path too long: %s/%s", dir, name);
    memcpy(out, dir, a);
    out[a] = '/';
    memcpy(out + a + 1, name, b + 1);
    return BP_OK;
}

int bp_mkdir_p(const char *path, bp_err *err) {
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
