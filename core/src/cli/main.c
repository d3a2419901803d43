/* The `plume` executable: everything is in libplume's plume_cli_main. */
#include "cli/cli.h"

int main(int argc, char **argv)
{
    return plume_cli_main(argc, argv);
}
