// Prints the MPI library's name and version (configure-time probe).
#include <mpi.h>
#include <stdio.h>
#include <string.h>
int main(void) {
    char v[MPI_MAX_LIBRARY_VERSION_STRING];
    int len = 0;
    MPI_Get_library_version(v, &len);  // callable before MPI_Init
    char *nl = strchr(v, '\n');
    if (nl) *nl = 0;
    printf("%s\n", v);
    return 0;
}
