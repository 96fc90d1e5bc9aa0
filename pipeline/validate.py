"""Stage validate: before any stage removes an output, check the whole params file (every key,
every budget preset, every (experiment, seed) stage and the networks it builds), the task
embeddings the CARE experiments read and the PTSL_* settings of this machine; a problem is one
line naming the key or file and what is allowed. Every other stage depends on the output,
data/validated.json, whose content never changes, so a passing check leaves them up to date."""


from ptsl.ops.paths import VALIDATED, write_stamp
from ptsl.ops.stage import run_stage, stage_parser
from ptsl.ops.validate import validate_project


def main() -> None:
    args = stage_parser(__doc__, VALIDATED,
                        "the stamp written when everything is valid").parse_args()
    params = validate_project(params_file=args.params)
    write_stamp(args.out)
    runs = len(params.trained) * len(params.seeds)
    print(f"valid: params.yaml ({runs} training stage(s)), task embeddings, PTSL_* settings")


if __name__ == "__main__":
    run_stage(main)
