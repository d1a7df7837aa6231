# Sets the run-path of an ELF file (setup.py, staging the Python package's libraries):
#   cmake -DFILE=path -DRUNPATH='$ORIGIN/_libs' -P set_runpath.cmake
# The file's build-tree run-path (absolute directories of the build) must be at least as long,
# which a relative one within the package always is.
file(RPATH_SET FILE "${FILE}" NEW_RPATH "${RUNPATH}")
