// Probes the machine for result files (see machine.h).
#include "fivefold/machine.h"

#include <mpi.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "fivefold/build_info.h"
#include "fivefold/gpu.h"

static void cpu_model(char *out, size_t cap) {
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f) return;
    char line[512];
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, "model name", 10) == 0) {
            const char *v = strchr(line, ':');
            if (v) {
                v++;
                while (*v == ' ') v++;
                snprintf(out, cap, "%s", v);
                out[strcspn(out, "\n")] = 0;
            }
            break;
        }
    }
    fclose(f);
}

void ff_machine_probe(ff_machine *m) {
    memset(m, 0, sizeof *m);
    cpu_model(m->cpu, sizeof m->cpu);
    m->cores = (int)sysconf(_SC_NPROCESSORS_ONLN);
    gethostname(m->hostname, sizeof m->hostname - 1);
    char v[MPI_MAX_LIBRARY_VERSION_STRING];
    int len = 0;
    if (MPI_Get_library_version(v, &len) == MPI_SUCCESS) {
        v[strcspn(v, "\n")] = 0;
        // MPICH prints "MPICH Version:\t4.0.2": make it "MPICH 4.0.2".
        char *t = strstr(v, " Version:");
        if (t) {
            char *val = t + 9;
            while (*val == '\t' || *val == ' ') val++;
            memmove(t + 1, val, strlen(val) + 1);
        }
        snprintf(m->mpi, sizeof m->mpi, "%.159s", v);
    }
    snprintf(m->nccl, sizeof m->nccl, "%s", FF_BUILD_NCCL_VERSION);
    int count = 0;
    if (ff_gpu_device_count(&count) == FF_OK && count > 0) {
        m->gpus = count;
        int sms, ccmaj, ccmin;
        size_t total;
        ff_gpu_device_info(0, m->gpu, sizeof m->gpu, &sms, &ccmaj, &ccmin, &total);
        ff_gpu_versions(&m->cuda_runtime, &m->cuda_driver);
    }
    ff_clear_error();  // no GPU is not an error here
}
