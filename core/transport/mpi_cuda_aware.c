// GPU-direct over MPI (comm.h: ff_comm_mpi_cuda_aware, ff_comm_mpi_device_direct): whether the
// MPI library takes device pointers, asked the way each library documents it — Open MPI's
// MPIX_Query_cuda_support (mpi-ext.h, compile- and run-time), MPICH's MPIX_GPU_query_support
// (MPICH 4.0 and later). A library with neither is taken as not CUDA-aware.
#include <mpi.h>
#include <stdio.h>
#include <string.h>

#include "comm_internal.h"

#if defined(OPEN_MPI) && OPEN_MPI && defined(__has_include)
#if __has_include(<mpi-ext.h>)
#include <mpi-ext.h>
#endif
#endif

static void library_name(char *out, size_t cap) {
    char v[MPI_MAX_LIBRARY_VERSION_STRING] = "";
    int len = 0;
    MPI_Get_library_version(v, &len);
    v[strcspn(v, ",\n")] = 0;  // "Open MPI v4.1.6, package: ..." -> "Open MPI v4.1.6"
    snprintf(out, cap, "%s", v);
}

ff_status ff_comm_mpi_cuda_aware(bool *yes, char *why, size_t why_cap) {
    char lib[128];
    library_name(lib, sizeof lib);
    *yes = false;
#if defined(MPIX_CUDA_AWARE_SUPPORT) && MPIX_CUDA_AWARE_SUPPORT
    *yes = MPIX_Query_cuda_support() != 0;
    snprintf(why, why_cap, "%s: built with CUDA support, MPIX_Query_cuda_support() = %d at run time", lib, (int)*yes);
#elif defined(OPEN_MPI) && OPEN_MPI
    snprintf(why, why_cap, "%s: built without CUDA support (mpi-ext.h has no MPIX_CUDA_AWARE_SUPPORT)", lib);
#elif defined(MPICH_NUMVERSION) && MPICH_NUMVERSION >= 40000000
    int ok = 0;
    if (MPIX_GPU_query_support(MPIX_GPU_SUPPORT_CUDA, &ok) != MPI_SUCCESS) ok = 0;
    *yes = ok != 0;
    snprintf(why, why_cap, "%s: MPIX_GPU_query_support(CUDA) = %d", lib, ok);
#else
    snprintf(why, why_cap, "%s: no documented way to ask for CUDA support", lib);
#endif
    return FF_OK;
}

ff_status ff_comm_mpi_device_direct(ff_comm *c) {
    if (strcmp(c->ops->name, "mpi") != 0)
        return FF_FAIL(FF_ERR_INPUT, "--transport mpi: the communicator is %s, not MPI", c->ops->name);
    bool yes = false;
    char why[256];
    FF_TRY(ff_comm_mpi_cuda_aware(&yes, why, sizeof why));
    if (!yes)
        return FF_FAIL(FF_ERR_INPUT,
                       "--transport mpi: the MPI library is not CUDA-aware (%s): it cannot take device buffers; "
                       "use --transport nccl (or auto), or --mode hybrid, which stages through host memory",
                       why);
    c->device_native = true;
    return FF_OK;
}
