// `fivefold`: one binary, every mode chosen at run time.
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "fivefold/build_info.h"

static const ff_command commands[] = {
    {"info", "print a model's layer table: shapes, parameters, FLOPs, halo rows, row-split plans", ff_cmd_info},
    {"infer", "run a forward pass in any mode; print the output digest, top-5 and time", ff_cmd_infer},
    {"verify", "check a mode against the PyTorch goldens: one row per layer and end to end", ff_cmd_verify},
    {"bench", "time a configuration after its checks pass (refuses otherwise); PyTorch side by side", ff_cmd_bench},
    {"train", "train mnist-cnn or the MLPs in any mode (by default the same bits on any rank count)", ff_cmd_train},
};
static const int n_commands = (int)(sizeof commands / sizeof commands[0]);

static void usage(FILE *f) {
    fprintf(f,
            "usage: fivefold <command> [options]      (fivefold <command> --help for its options)\n\n"
            "AlexNet inference, MNIST-CNN and MLP training in five execution modes (serial, mpi, cuda,\n"
            "hybrid, direct), each verified against PyTorch before anything is timed.\n\ncommands:\n");
    for (int i = 0; i < n_commands; i++) fprintf(f, "  %-8s %s\n", commands[i].name, commands[i].summary);
    fprintf(f,
            "\nexit codes: 0 ok, 1 internal failure, 2 bad usage or input, 3 bench gate refused,\n"
            "            4 verification failed, 77 mode unavailable on this machine (no GPU / no CUDA)\n");
    fprintf(
        f,
        "\nenvironment (GPU modes: the defaults of --conv, --winograd-m and --s2d, which always win;\n"
        "each plan is its own digest class, compared with its own record or by tolerance alone):\n"
        "  FF_CUDA_CONV=direct   default of --conv: direct conv kernels everywhere (else Winograd where it applies)\n"
        "  FF_WINOGRAD_M=2       default of --winograd-m: F(2x2, r x r) instead of F(4x4, r x r)\n"
        "  FF_CUDA_S2D=0         default of --s2d: strided convs (conv1) direct instead of space-to-depth\n"
        "environment (CPU modes; same bits either way):\n"
        "  FF_CPU_VECTOR=128|256|512 the CPU conv kernel's copy: baseline, AVX2 or AVX-512 (default: the\n"
        "                   widest this CPU has; every copy gives the same bits)\n");
}

int main(int argc, char **argv) {
    // Under mpiexec every process sees the same arguments: one of them reports a bad command.
    const bool speak = ff_cli_launcher_rank() == 0;
    if (argc < 2) {
        if (speak) usage(stderr);
        fflush(stderr);
        ff_cli_launcher_barrier();  // under mpiexec: no process exits before rank 0 has printed
        ff_cli_mpi_finalize();
        return FF_EXIT_USAGE;
    }
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
        usage(stdout);
        return FF_EXIT_OK;
    }
    if (!strcmp(argv[1], "--version")) {
        printf("fivefold %s (commit %s, %s, %s; CUDA %s; NCCL %s)\n", FF_VERSION, FF_GIT_COMMIT, FF_BUILD_TYPE,
               FF_BUILD_C_COMPILER, strcmp(FF_BUILD_HAVE_CUDA_STR, "ON") == 0 ? FF_BUILD_CUDA_VERSION : "off",
               *FF_BUILD_NCCL_VERSION ? FF_BUILD_NCCL_VERSION : "off");
        return FF_EXIT_OK;
    }
    // --verbose anywhere: the command's own parser may refuse an earlier flag before it sees it.
    for (int i = 2; i < argc; i++)
        if (!strcmp(argv[i], "--verbose")) ff_cli_verbose = true;
    for (int i = 0; i < n_commands; i++) {
        if (!strcmp(argv[1], commands[i].name)) {
            int rc = commands[i].run(argc - 1, argv + 1);
            fflush(stdout);
            ff_cli_mpi_finalize();
            return rc;
        }
    }
    char names[256] = "";
    for (int i = 0; i < n_commands; i++)
        snprintf(names + strlen(names), sizeof names - strlen(names), " %s", commands[i].name);
    const int rc = ff_cli_fail_command_line("unknown command '%s': expected one of%s", argv[1], names);
    ff_cli_mpi_finalize();
    return rc;
}
