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
 * It only patches a provider that is what the adapter was written for: backend id HTP and the
 * core / backend API major.minor versions given at build time (-DQNN_GENAI_EXPECT_*, from the
 * known-good table in pytest_qnn_genai/sdk/adapter.py). Anything else is returned unpatched (so
 * device creation fails loudly instead of running on a guessed layout), one line is printed to
 * stderr once, and pytest_qnn_genai_adapter_status() reports a code and that line, for Python to
 * call after loading. A table in memory that cannot be made writable (mprotect fails) is
 * reported the same way.
 *
 * Link with -Wl,-z,nodelete: executorch unloads and reloads libQnnHtp.so, and the patched
 * tables in the real library keep pointing into this one.
 *
 * Layouts below are from QNN's public headers (QnnCommon.h, QnnTypes.h, QnnInterface.h,
 * QnnDevice.h, HTP/QnnHtpDevice.h). No copy ships in the executorch 1.5.1 wheel; they were read
 * from public mirrors: github.com/chuzcjoe/qnnx include/QNN (QAIRT 2.43 headers: QnnTypes.h,
 * QnnDevice.h, QnnCommon.h, HTP/QnnHtpDevice.h), the QnnInterface.h once committed to
 * pytorch/executorch (commit e19776e5, build_android-DCMAKE_BUILD_TYPE=Release/backends/qualcomm/
 * qnn_executorch/backends/QNN/include/QnnInterface.h: QnnInterface_t and the table order), and
 * budcribar/QualcommNPU SampleCSharpApplication/QnnInterface.cs, which spells the table out
 * with byte offsets (deviceCreate at 320 = slot 40, deviceSetConfig at 328).
 * Measured on the x86 libQnnHtp.so of QAIRT 2.47.0 to 2.51.0 (onnxruntime-qnn 2.3.0-2.7.0): one
 * provider, backend id 6, "HTP_QTI_AISW", in writable heap memory. QAIRT 2.49.40 keeps the old
 * device config layout: there the re-layout breaks device creation, hence the version check.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <libgen.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#if !defined(QNN_GENAI_EXPECT_CORE_MAJOR) || !defined(QNN_GENAI_EXPECT_CORE_MINOR) || \
    !defined(QNN_GENAI_EXPECT_BACKEND_MAJOR) || !defined(QNN_GENAI_EXPECT_BACKEND_MINOR)
#error "build with -DQNN_GENAI_EXPECT_{CORE,BACKEND}_{MAJOR,MINOR}=N (see sdk/adapter.py)"
#endif
#ifndef QNN_GENAI_EXPECT_QAIRT
#define QNN_GENAI_EXPECT_QAIRT "?"
#endif

/* QnnCommon.h: typedef uint64_t Qnn_ErrorHandle_t. */
typedef uint64_t qnn_status_t;

/* QnnCommon.h lists the backend ids; QnnHtpCommon.h: #define QNN_BACKEND_ID_HTP 6. */
enum { QNN_BACKEND_ID_HTP = 6 };

/* QnnTypes.h: typedef struct { uint32_t major; uint32_t minor; uint32_t patch; } Qnn_Version_t;
 * typedef struct { Qnn_Version_t coreApiVersion; Qnn_Version_t backendApiVersion; }
 * Qnn_ApiVersion_t. */
typedef struct {
  uint32_t major, minor, patch;
} qnn_version_t;

/* QnnInterface.h: typedef struct { uint32_t backendId; const char* providerName;
 * Qnn_ApiVersion_t apiVersion; union { QNN_INTERFACE_VER_TYPE QNN_INTERFACE_VER_NAME; }; }
 * QnnInterface_t. So backendId @0, providerName @8, coreApiVersion @16, backendApiVersion @28
 * and the function table (a struct of function pointers, pointer aligned) @40. */
typedef struct {
  uint32_t backend_id;
  const char *provider_name;
  qnn_version_t core_api;
  qnn_version_t backend_api;
  void *table[];
} qnn_interface_t;
_Static_assert(offsetof(qnn_interface_t, core_api) == 16, "QnnInterface_t.apiVersion @16");
_Static_assert(offsetof(qnn_interface_t, backend_api) == 28, "backendApiVersion @28");
_Static_assert(offsetof(qnn_interface_t, table) == 40, "QnnInterface_t function table @40");

/* QnnInterface.h QNN_INTERFACE_VER_TYPE, counted in pointers: propertyHasCapability (0);
 * backendCreate, backendSetConfig, backendGetApiVersion, backendGetBuildId,
 * backendRegisterOpPackage, backendGetSupportedOperations, backendValidateOpConfig, backendFree
 * (1-8); contextCreate, contextSetConfig, contextGetBinarySize, contextGetBinary,
 * contextCreateFromBinary, contextFree (9-14); graphCreate, graphCreateSubgraph, graphSetConfig,
 * graphAddNode, graphFinalize, graphRetrieve, graphExecute, graphExecuteAsync (15-22);
 * tensorCreateContextTensor, tensorCreateGraphTensor (23-24); logCreate, logSetLogLevel, logFree
 * (25-27); profileCreate, profileSetConfig, profileGetEvents, profileGetSubEvents,
 * profileGetEventData, profileGetExtendedEventData, profileFree (28-34); memRegister,
 * memDeRegister (35-36); deviceGetPlatformInfo, deviceFreePlatformInfo, deviceGetInfrastructure
 * (37-39); deviceCreate (40), deviceSetConfig (41), deviceGetInfo, deviceFree, ... Later QNN
 * releases only append entries. */
enum { SLOT_DEVICE_CREATE = 40, SLOT_DEVICE_SET_CONFIG = 41 };

/* QnnDevice.h: typedef struct { QnnDevice_ConfigOption_t option; union { QnnDevice_CustomConfig_t
 * customConfig; QnnDevice_PlatformInfo_t* hardwareInfo; }; } QnnDevice_Config_t, with
 * QNN_DEVICE_CONFIG_OPTION_CUSTOM = 0. */
typedef struct {
  uint32_t option;
  void *custom;
} device_config_t;
enum { DEVICE_CONFIG_OPTION_CUSTOM = 0 };

typedef qnn_status_t (*device_create_fn)(void *, const device_config_t **, void **);
typedef qnn_status_t (*device_set_config_fn)(void *, const device_config_t **);
typedef qnn_status_t (*get_providers_fn)(const qnn_interface_t ***, uint32_t *);

/* Status codes returned by pytest_qnn_genai_adapter_status (mirrored in sdk/adapter.py). */
enum {
  ADAPTER_OK = 0,               /* every provider checked and patched */
  ADAPTER_NOT_CALLED = 1,       /* QnnInterface_getProviders was never called */
  ADAPTER_NO_REAL_LIBRARY = 2,  /* libQnnHtpReal.so (or its entry point) could not be loaded */
  ADAPTER_PROVIDERS_FAILED = 3, /* the real QnnInterface_getProviders failed or gave none */
  ADAPTER_BACKEND_MISMATCH = 4, /* a provider is not the HTP backend: left unpatched */
  ADAPTER_API_MISMATCH = 5,     /* a provider's API version is not the expected one: unpatched */
  ADAPTER_MPROTECT_FAILED = 6,  /* the table could not be made writable: unpatched */
  ADAPTER_BAD_TABLE = 7,        /* deviceCreate / deviceSetConfig missing: unpatched */
};

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static void *g_real;
static device_create_fn g_real_device_create;
static device_set_config_fn g_real_device_set_config;
static int g_status = ADAPTER_NOT_CALLED;
static char g_message[512] = "QnnInterface_getProviders has not been called yet";

/* Record the first failure (later ones do not overwrite it) and print it once. */
static void fail(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void fail(int code, const char *fmt, ...) {
  if (g_status != ADAPTER_OK && g_status != ADAPTER_NOT_CALLED) return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(g_message, sizeof(g_message), fmt, ap);
  va_end(ap);
  g_status = code;
  fprintf(stderr, "[qnn-genai adapter] %s\n", g_message);
}

__attribute__((visibility("default"))) int pytest_qnn_genai_adapter_status(const char **message) {
  pthread_mutex_lock(&g_lock);
  int code = g_status;
  if (message) *message = g_message;
  pthread_mutex_unlock(&g_lock);
  return code;
}

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

/* Protection of the mapping holding [start, end) from /proc/self/maps: PROT_* bits, or -1 if
 * the range is not inside one mapping (or maps cannot be read). */
static int mapping_prot(uintptr_t start, uintptr_t end) {
  FILE *maps = fopen("/proc/self/maps", "r");
  if (!maps) return -1;
  char line[512];
  int prot = -1;
  while (fgets(line, sizeof(line), maps)) {
    unsigned long lo, hi;
    char perms[8] = "";
    if (sscanf(line, "%lx-%lx %7s", &lo, &hi, perms) != 3) continue;
    if (start >= lo && end <= hi) {
      prot = (perms[0] == 'r' ? PROT_READ : 0) | (perms[1] == 'w' ? PROT_WRITE : 0) |
             (perms[2] == 'x' ? PROT_EXEC : 0);
      break;
    }
  }
  fclose(maps);
  return prot;
}

/* Replace the two device slots of one table. Returns 0, or -1 after fail(). */
static int patch_table(const qnn_interface_t *provider, void **table) {
  void **first = &table[SLOT_DEVICE_CREATE];
  uintptr_t start = (uintptr_t)first;
  uintptr_t end = (uintptr_t)(&table[SLOT_DEVICE_SET_CONFIG] + 1);
  long page = sysconf(_SC_PAGESIZE);
  uintptr_t page_start = start & ~(uintptr_t)(page - 1);
  size_t length = (size_t)(end - page_start);
  int prot = mapping_prot(start, end);
  int restore = -1; /* protection to put back after writing, if it had to be changed */
  if (prot < 0 || !(prot & PROT_WRITE)) {
    /* Unknown mapping (maps unreadable or the slots straddle two mappings): make it read-write
     * and leave it so, never read-only. A read-only mapping: add write, restore afterwards. */
    int want = prot < 0 ? PROT_READ | PROT_WRITE : prot | PROT_WRITE;
    if (mprotect((void *)page_start, length, want) != 0) {
      fail(ADAPTER_MPROTECT_FAILED,
           "cannot patch QNN provider %s: its interface table at %p is not writable and "
           "mprotect(PROT_WRITE) failed: %s; left unpatched, device creation will fail",
           provider->provider_name ? provider->provider_name : "(unnamed)", (void *)first,
           strerror(errno));
      return -1;
    }
    restore = prot;
  }
  g_real_device_create = (device_create_fn)table[SLOT_DEVICE_CREATE];
  g_real_device_set_config = (device_set_config_fn)table[SLOT_DEVICE_SET_CONFIG];
  table[SLOT_DEVICE_CREATE] = (void *)adapted_device_create;
  table[SLOT_DEVICE_SET_CONFIG] = (void *)adapted_device_set_config;
  if (restore >= 0 && mprotect((void *)page_start, length, restore) != 0) {
    /* patched, but the table stays writable: harmless, and reported */
    fprintf(stderr, "[qnn-genai adapter] patched, but could not restore the protection of the "
                    "interface table: %s\n", strerror(errno));
  }
  return 0;
}

static void check_and_patch(const qnn_interface_t *provider) {
  const char *name = provider->provider_name ? provider->provider_name : "(unnamed)";
  void **table = (void **)provider->table;
  if (table[SLOT_DEVICE_CREATE] == (void *)adapted_device_create) return; /* done already */
  if (provider->backend_id != QNN_BACKEND_ID_HTP) {
    fail(ADAPTER_BACKEND_MISMATCH,
         "not patching QNN provider %s: backend id %u, the adapter is for HTP (%d); "
         "device creation will fail", name, provider->backend_id, QNN_BACKEND_ID_HTP);
    return;
  }
  if (provider->core_api.major != QNN_GENAI_EXPECT_CORE_MAJOR ||
      provider->core_api.minor != QNN_GENAI_EXPECT_CORE_MINOR ||
      provider->backend_api.major != QNN_GENAI_EXPECT_BACKEND_MAJOR ||
      provider->backend_api.minor != QNN_GENAI_EXPECT_BACKEND_MINOR) {
    fail(ADAPTER_API_MISMATCH,
         "not patching QNN provider %s: core API %u.%u.%u / HTP API %u.%u.%u, the adapter was "
         "written for core API %d.%d / HTP API %d.%d (QAIRT %s); device creation will fail",
         name, provider->core_api.major, provider->core_api.minor, provider->core_api.patch,
         provider->backend_api.major, provider->backend_api.minor, provider->backend_api.patch,
         QNN_GENAI_EXPECT_CORE_MAJOR, QNN_GENAI_EXPECT_CORE_MINOR,
         QNN_GENAI_EXPECT_BACKEND_MAJOR, QNN_GENAI_EXPECT_BACKEND_MINOR, QNN_GENAI_EXPECT_QAIRT);
    return;
  }
  if (!table[SLOT_DEVICE_CREATE] || !table[SLOT_DEVICE_SET_CONFIG]) {
    fail(ADAPTER_BAD_TABLE, "not patching QNN provider %s: it has no deviceCreate/deviceSetConfig",
         name);
    return;
  }
  if (patch_table(provider, table) == 0 && g_status == ADAPTER_NOT_CALLED) {
    g_status = ADAPTER_OK;
    snprintf(g_message, sizeof(g_message),
             "patched QNN provider %s (core API %u.%u.%u, HTP API %u.%u.%u)", name,
             provider->core_api.major, provider->core_api.minor, provider->core_api.patch,
             provider->backend_api.major, provider->backend_api.minor,
             provider->backend_api.patch);
  }
}

static void *open_real_library(char *path_out, size_t path_len) {
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
  snprintf(path_out, path_len, "%s", path);
  return dlopen(path, RTLD_NOW | RTLD_LOCAL);
}

__attribute__((visibility("default"))) qnn_status_t QnnInterface_getProviders(
    const qnn_interface_t ***providers, uint32_t *count) {
  pthread_mutex_lock(&g_lock);
  if (!g_real) {
    char path[PATH_MAX] = "";
    g_real = open_real_library(path, sizeof(path));
    if (!g_real) {
      const char *why = dlerror();
      fail(ADAPTER_NO_REAL_LIBRARY, "cannot load the real QNN HTP library %s: %s", path,
           why ? why : "dladdr failed");
    }
  }
  get_providers_fn real =
      g_real ? (get_providers_fn)dlsym(g_real, "QnnInterface_getProviders") : NULL;
  if (g_real && !real)
    fail(ADAPTER_NO_REAL_LIBRARY, "the real QNN HTP library has no QnnInterface_getProviders");
  pthread_mutex_unlock(&g_lock);
  if (!real) return 1;
  qnn_status_t rc = real(providers, count);
  pthread_mutex_lock(&g_lock);
  if (rc != 0 || !providers || !*providers || !count || *count == 0) {
    fail(ADAPTER_PROVIDERS_FAILED, "the real QnnInterface_getProviders failed (error %llu, %u "
         "providers)", (unsigned long long)rc, count ? *count : 0);
  } else {
    for (uint32_t i = 0; i < *count; i++) check_and_patch((*providers)[i]);
  }
  pthread_mutex_unlock(&g_lock);
  return rc;
}
