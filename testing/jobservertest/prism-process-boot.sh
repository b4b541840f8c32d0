#!/bin/sh
# The PROCESS command for Prism (Beam Go v2.77.0): Prism starts it with
# --id='<worker id>', the quotes part of the argument (no shell removes
# them), and Beam's boot loader then asks for a worker id that is not
# registered and exits. This strips the quotes and runs the boot loader
# named by BEAM_BOOT (default: the SDK container's).
#   --environment_type=PROCESS --environment_config='{"command":"/path/prism-process-boot.sh","env":{"BEAM_BOOT":"/path/boot"}}'
case $1 in --id=\'*\') id=${1#--id=\'}; shift; set -- "--id=${id%\'}" "$@" ;; esac
exec "${BEAM_BOOT:-/opt/apache/beam/boot}" "$@"
