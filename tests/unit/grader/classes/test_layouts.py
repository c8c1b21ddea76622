"""`grader.classes.layouts`: a fake Canvas or Moodle download, a folder of learners, a git
class and a zipped class, each detected and staged as one folder per learner."""

from __future__ import annotations

from pathlib import Path

import pytest

from grader.classes.layouts import LayoutError, detect, stage
from grader.classes.zips import write_zip

HEAD = "0123456789abcdef0123456789abcdef01234567"


def files(folder: Path, *names: str) -> Path:
    for name in names:
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(name)
    return folder


def test_a_canvas_download_keeps_the_latest_resubmission(tmp_path: Path) -> None:
    download = files(
        tmp_path / "dl",
        "smithjane_12_34_03_build.ipynb",
        "smithjane_12_35_03_build-2.ipynb",
        "doejohn_late_7_8_03_build.ipynb",
        "readme.txt",
    )
    assert detect(download) == "canvas"
    staged = stage(download, into=tmp_path / "staged")
    assert staged.layout == "canvas" and not staged.in_place
    assert [x.learner for x in staged.learners] == ["doejohn", "smithjane"]
    jane = staged.learner("smithjane")
    assert jane is not None
    assert (jane.user_id, jane.submission_id, jane.prefix) == ("12", "35", "smithjane_12_35")
    assert jane.notes == (
        "smithjane_12_34_03_build.ipynb: an earlier submission of 03_build.ipynb, not graded",
    )
    kept = staged.folder / "smithjane" / "03_build.ipynb"
    assert kept.read_text() == "smithjane_12_35_03_build-2.ipynb"
    john = staged.learner("doejohn")
    assert john is not None and john.late
    assert staged.notes == ("readme.txt: not a Canvas submission file, not graded",)


def test_two_canvas_learners_sharing_a_name_get_their_ids(tmp_path: Path) -> None:
    download = files(tmp_path / "dl", "lee_1_10_03_a.ipynb", "lee_2_20_03_a.ipynb")
    staged = stage(download, into=tmp_path / "staged")
    assert [x.learner for x in staged.learners] == ["lee_1", "lee_2"]


def test_a_moodle_download_is_one_folder_per_participant(tmp_path: Path) -> None:
    download = files(
        tmp_path / "dl",
        "Jane Smith_101_assignsubmission_file_/03_build.ipynb",
        "Jane Smith_101_assignsubmission_file_/.hidden",
        "John Doe_202_assignsubmission_file/work/03_build.ipynb",
    )
    assert detect(download) == "moodle"
    staged = stage(download, into=tmp_path / "staged")
    assert [x.learner for x in staged.learners] == ["Jane Smith_101", "John Doe_202"]
    jane = staged.learner("Jane Smith_101")
    assert jane is not None and jane.prefix == "Jane Smith_101_assignsubmission_file_"
    assert jane.files == ("Jane Smith_101_assignsubmission_file_/03_build.ipynb",)
    assert (staged.folder / "John Doe_202" / "work" / "03_build.ipynb").is_file()


def test_folders_are_graded_in_place_and_git_clones_record_their_commit(tmp_path: Path) -> None:
    plain = files(tmp_path / "plain", "ada/03_x.ipynb", "bo/03_x.ipynb")
    assert detect(plain) == "folders"
    staged = stage(plain, into=tmp_path / "never")
    assert staged.in_place and staged.folder == plain
    assert not (tmp_path / "never").exists()
    git = files(tmp_path / "git", "ada/.git/HEAD", "bo/.git/HEAD")
    (git / "ada" / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    files(git, "ada/.git/refs/heads/main")
    (git / "ada" / ".git" / "refs" / "heads" / "main").write_text(HEAD + "\n")
    (git / "bo" / ".git" / "HEAD").write_text("not a commit\n")
    assert detect(git) == "git"
    learners = {x.learner: x for x in stage(git, into=tmp_path / "never").learners}
    assert learners["ada"].commit == HEAD and learners["ada"].notes == ()
    assert learners["bo"].commit == "" and learners["bo"].notes == (
        "no git commit found in this folder",
    )


def test_a_zipped_class_is_unpacked_from_its_wrapper_folder(tmp_path: Path) -> None:
    path = tmp_path / "class.zip"
    write_zip(path, {"class/ada/03_x.ipynb": "{}", "class/bo/03_x.ipynb": "{}"})
    assert detect(path) == "folders"
    staged = stage(path, into=tmp_path / "staged")
    assert [x.learner for x in staged.learners] == ["ada", "bo"]
    assert (staged.folder / "ada" / "03_x.ipynb").read_text() == "{}"
    again = stage(path, into=tmp_path / "staged")  # replaced whole
    assert again == staged


def test_staging_refuses_a_folder_it_did_not_make(tmp_path: Path) -> None:
    download = files(tmp_path / "dl", "lee_1_10_03_a.ipynb")
    files(tmp_path / "mine", "keep.txt")
    with pytest.raises(LayoutError, match="was not made by staging: refusing to replace it"):
        stage(download, into=tmp_path / "mine")
    with pytest.raises(LayoutError, match="must be apart from"):
        stage(download, into=download / "inside")
    assert (tmp_path / "mine" / "keep.txt").is_file()


def test_an_unknown_layout_or_missing_path_is_refused(tmp_path: Path) -> None:
    with pytest.raises(LayoutError, match="no such folder or zip"):
        detect(tmp_path / "nothing")
    with pytest.raises(LayoutError, match="LAYOUT=blackboard: not one of auto, folders"):
        stage(tmp_path, "blackboard", into=tmp_path / "x")  # type: ignore[arg-type]
    (tmp_path / "bad.zip").write_text("not a zip")
    with pytest.raises(LayoutError, match="not a readable zip"):
        detect(tmp_path / "bad.zip")
