/*
 * pytest-qnn-genai: QNN HTP ABI adapter for the x86 emulator SDK.
 *
 * executorch 1.5.1 is compiled against QNN 2.37 headers. In newer QAIRT releases the union inside
 * QnnHtpDevice_CustomConfig_t is 8-byte aligned (it starts at byte 8, not byte 4), so the SoC
 * model that executorch writes at byte 4 is read as 0 and device creation fails.
 *
 * This library is installed as libQnnHtp.so. It loads the real library (libQnnHtpReal.so in the
 * same folder, or $QNN_GENAI_REAL_HTP), forwards QnnInterface_getProviders, and swaps the two
 * device entry points of every returned interface table (deviceCreate, deviceSetConfig) for
 * wrappers that re-lay each custom device config in the new layout before calling the real ones.
 *
 * Link with -Wl,-z,nodelete: executorch unloads and reloads libQnnHtp.so, and the patched
 * tables in the real library keep pointing into this one.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <libgen.h>
#include <limits.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

typedef uint64_t qnn_status_t;

/* QnnDevice_Config_t: {QnnDevice_ConfigOption_t option; union {void* customConfig; ...}} */
typedef struct {
  uint32_t option;
  void *custom;
} device_config_t;

enum { DEVICE_CONFIG_OPTION_CUSTOM = 0 };
/* Slots of QNN_INTERFACE_VER_TYPE counted in pointers, and where that table starts inside a
 * QnnInterface_t provider (after backendId, providerName, apiVersion). */
enum { SLOT_DEVICE_CREATE = 40, SLOT_DEVICE_SET_CONFIG = 41, TABLE_BYTE_OFFSET = 40 };

typedef qnn_status_t (*device_create_fn)(void *, const device_config_t **, void **);
typedef qnn_status_t (*device_set_config_fn)(void *, const device_config_t **);
typedef qnn_status_t (*get_providers_fn)(const void ***, uint32_t *);

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static void *g_real;
static device_create_fn g_real_device_create;
static device_set_config_fn g_real_device_set_config;

/* Old layout: {u32 option; u32 value[2]} at offsets 0/4/8. New: {u32 option; pad; u32 value[2]}
 * at offsets 0/8/12. The copies live as long as the device (leaked: a few bytes per device). */
static const device_config_t **relayout(const device_config_t **in) {
  if (!in) return NULL;
  size_t n = 0;
  while (in[n]) n++;
  const device_config_t **out = calloc(n + 1, sizeof(*out));
  if (!out) return in;
  for (size_t i = 0; i < n; i++) {
    out[i] = in[i];
    if (in[i]->option != DEVICE_CONFIG_OPTION_CUSTOM || !in[i]->custom) continue;
    const uint32_t *old_words = (const uint32_t *)in[i]->custom;
    uint32_t *new_words = calloc(16, sizeof(uint32_t));
    device_config_t *copy = calloc(1, sizeof(*copy));
    if (!new_words || !copy) continue;
    new_words[0] = old_words[0];
    new_words[2] = old_words[1];
    new_words[3] = old_words[2];
    copy->option = DEVICE_CONFIG_OPTION_CUSTOM;
    copy->custom = new_words;
    out[i] = copy;
  }
  return out;
}

static qnn_status_t adapted_device_create(void *logger, const device_config_t **cfg, void **dev) {
  return g_real_device_create(logger, relayout(cfg), dev);
}

static qnn_status_t adapted_device_set_config(void *dev, const device_config_t **cfg) {
  return g_real_device_set_config(dev, relayout(cfg));
}

static void write_slot(void **slot, void *fn) {
  long page = sysconf(_SC_PAGESIZE);
  uintptr_t start = (uintptr_t)slot & ~(uintptr_t)(page - 1);
  mprotect((void *)start, (size_t)page * 2, PROT_READ | PROT_WRITE);
  *slot = fn;
}

static void *open_real_library(void) {
  const char *path = getenv("QNN_GENAI_REAL_HTP");
  char buf[PATH_MAX];
  if (!path) {
    Dl_info info;
    if (!dladdr((void *)&open_real_library, &info)) return NULL;
    snprintf(buf, sizeof(buf), "%s", info.dli_fname);
    char *dir = dirname(buf);
    size_t len = strlen(dir);
    memmove(buf, dir, len + 1);
    snprintf(buf + len, sizeof(buf) - len, "/libQnnHtpReal.so");
    path = buf;
  }
  void *handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!handle) fprintf(stderr, "[qnn-genai adapter] cannot load %s: %s\n", path, dlerror());
  return handle;
}

__attribute__((visibility("default"))) qnn_status_t QnnInterface_getProviders(
    const void ***providers, uint32_t *count) {
  pthread_mutex_lock(&g_lock);
  if (!g_real) g_real = open_real_library();
  pthread_mutex_unlock(&g_lock);
  if (!g_real) return 1;
  get_providers_fn real = (get_providers_fn)dlsym(g_real, "QnnInterface_getProviders");
  if (!real) return 1;
  qnn_status_t rc = real(providers, count);
  if (rc != 0) return rc;
  pthread_mutex_lock(&g_lock);
  for (uint32_t i = 0; i < *count; i++) {
    void **table = (void **)((char *)(*providers)[i] + TABLE_BYTE_OFFSET);
    if (table[SLOT_DEVICE_CREATE] == (void *)adapted_device_create) continue;
    g_real_device_create = (device_create_fn)table[SLOT_DEVICE_CREATE];
    g_real_device_set_config = (device_set_config_fn)table[SLOT_DEVICE_SET_CONFIG];
    write_slot(&table[SLOT_DEVICE_CREATE], (void *)adapted_device_create);
    write_slot(&table[SLOT_DEVICE_SET_CONFIG], (void *)adapted_device_set_config);
  }
  pthread_mutex_unlock(&g_lock);
  return rc;
}
