/* sync_trace: an LD_PRELOAD library for the crash-consistency test (crash_consistency_test.cc).
 * It records what each fsync and fdatasync of a process made durable, for the files and
 * folders under $TESSERA_SYNC_TRACE_DIR, into the file $TESSERA_SYNC_TRACE_FILE (appended, one
 * line per sync, each written with one write(2)):
 *
 *   file <size>\t<path>          a regular file synced while it had <size> bytes
 *   dir <path>\t<name>/<name>/   a folder synced while it held these entries
 *
 * After the process is SIGKILLed, the test cuts every file back to what its last sync covered
 * and removes entries created after their folder's last sync: what a power cut may leave of
 * data that was written but not synced (the worst case a file system allows). Then the syncs
 * themselves run as usual (the real fsync/fdatasync, found with dlsym(RTLD_NEXT)). */
#define _GNU_SOURCE
#include <dirent.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static pthread_mutex_t trace_mu = PTHREAD_MUTEX_INITIALIZER;

/* The line for `fd` as it is before its sync (a sync covers at least that), or NULL when it is
 * not traced. */
static char* Describe(int fd, int* out_len) {
  const char* prefix = getenv("TESSERA_SYNC_TRACE_DIR");
  if (prefix == NULL || getenv("TESSERA_SYNC_TRACE_FILE") == NULL) return NULL;
  char link[64];
  char path[4096];
  snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
  const ssize_t n = readlink(link, path, sizeof path - 1);
  if (n <= 0) return NULL;
  path[n] = '\0';
  if (strncmp(path, prefix, strlen(prefix)) != 0) return NULL;
  struct stat st;
  if (fstat(fd, &st) != 0) return NULL;
  size_t cap = 1 << 16;
  char* line = malloc(cap);
  if (line == NULL) return NULL;
  int len = 0;
  if (S_ISDIR(st.st_mode)) {
    len = snprintf(line, cap, "dir %s\t", path);
    DIR* dir = opendir(path);
    if (dir != NULL) {
      struct dirent* e;
      while ((e = readdir(dir)) != NULL && (size_t)len + 300 < cap) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
        len += snprintf(line + len, cap - (size_t)len, "%s/", e->d_name);
      }
      closedir(dir);
    }
    len += snprintf(line + len, cap - (size_t)len, "\n");
  } else if (S_ISREG(st.st_mode)) {
    len = snprintf(line, cap, "file %lld\t%s\n", (long long)st.st_size, path);
  }
  *out_len = len;
  return line;
}

/* Appends what Describe said, once the sync succeeded. */
static void Record(char* line, int len) {
  if (line == NULL) return;
  if (len > 0) {
    pthread_mutex_lock(&trace_mu);
    const int out =
        open(getenv("TESSERA_SYNC_TRACE_FILE"), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (out >= 0) {
      if (write(out, line, (size_t)len) != len) { /* the test then finds a short trace */
      }
      close(out);
    }
    pthread_mutex_unlock(&trace_mu);
  }
  free(line);
}

/* Runs the real `name` (fsync or fdatasync) on `fd`, tracing what it covered. */
static int TracedSync(const char* name, int (**real)(int), int fd) {
  if (*real == NULL) *real = (int (*)(int))dlsym(RTLD_NEXT, name);
  int len = 0;
  char* line = Describe(fd, &len);
  const int r = (*real)(fd);
  if (r == 0) {
    Record(line, len);
  } else {
    free(line);
  }
  return r;
}

int fsync(int fd) {
  static int (*real)(int) = NULL;
  return TracedSync("fsync", &real, fd);
}

int fdatasync(int fd) {
  static int (*real)(int) = NULL;
  return TracedSync("fdatasync", &real, fd);
}
