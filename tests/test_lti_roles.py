"""Who is staff, a learner or neither in the course they launched from: context roles only
(LTI 1.3 core, appendix A.2.3), platform and institution administrators by the deployment's
choice."""

from __future__ import annotations

import pytest

from normdive.lti.roles import CourseRole, context_role, course_role, is_staff

LIS = "http://purl.imsglobal.org/vocab/lis/v2/"
INSTRUCTOR = f"{LIS}membership#Instructor"
LEARNER = f"{LIS}membership#Learner"
INSTITUTION_INSTRUCTOR = f"{LIS}institution/person#Instructor"
INSTITUTION_STUDENT = f"{LIS}institution/person#Student"
INSTITUTION_ADMIN = f"{LIS}institution/person#Administrator"
SYSTEM_ADMIN = f"{LIS}system/person#Administrator"
SYSADMIN = f"{LIS}system/person#SysAdmin"

CASES = [
    ([INSTRUCTOR], CourseRole.STAFF),
    ([f"{LIS}membership/Instructor#TeachingAssistant"], CourseRole.STAFF),
    ([f"{LIS}membership#ContentDeveloper"], CourseRole.STAFF),
    ([f"{LIS}membership#Administrator"], CourseRole.STAFF),
    ([f"{LIS}membership/Administrator#Support"], CourseRole.STAFF),
    (["Instructor"], CourseRole.STAFF),  # the short name LTI 1.3 allows
    (["TeachingAssistant"], CourseRole.STAFF),  # LTI 1.1's, still sent
    ([LEARNER, INSTRUCTOR], CourseRole.STAFF),  # staff wins: never graded
    ([LEARNER], CourseRole.LEARNER),
    (["Learner"], CourseRole.LEARNER),
    ([f"{LIS}membership/Learner#NonCreditLearner"], CourseRole.LEARNER),
    # What Canvas sends a student who teaches another course of the account.
    ([LEARNER, INSTITUTION_INSTRUCTOR, INSTITUTION_STUDENT], CourseRole.LEARNER),
    # An administrator enrolled as a learner is a learner unless the deployment opts in.
    ([LEARNER, INSTITUTION_ADMIN, SYSTEM_ADMIN], CourseRole.LEARNER),
    ([f"{LIS}membership#Mentor"], CourseRole.OTHER),  # sees only whom the platform names
    ([INSTITUTION_INSTRUCTOR], CourseRole.OTHER),  # no context role: no grade, no class
    ([INSTITUTION_ADMIN], CourseRole.OTHER),
    ([], CourseRole.OTHER),
    # Made up, though they end in a staff name.
    (["https://example.com/roles#Instructor"], CourseRole.OTHER),
    (["x#Instructor"], CourseRole.OTHER),
    (["#Instructor"], CourseRole.OTHER),
    ([f"{LIS}evil#Administrator"], CourseRole.OTHER),
    ([f"{LIS}membership/Learner#Instructor"], CourseRole.LEARNER),  # LIS's Learner sub-role
    ([f"{LIS}membership/Instructor#"], CourseRole.OTHER),
    ([f"{LIS}membership/Instructor#Teaching Assistant"], CourseRole.OTHER),
    ([f"{LIS}membership#Instructor#Extra"], CourseRole.OTHER),
]


@pytest.mark.parametrize(("roles", "role"), CASES)
def test_the_course_role_is_read_from_context_roles(roles: list[str], role: CourseRole) -> None:
    assert course_role(tuple(roles)) is role
    assert is_staff(tuple(roles)) is (role is CourseRole.STAFF)


@pytest.mark.parametrize(
    ("roles", "staff"),
    [
        ([SYSTEM_ADMIN], True),
        ([SYSADMIN], True),
        ([INSTITUTION_ADMIN, LEARNER], True),
        ([INSTITUTION_INSTRUCTOR], False),  # an institution's instructor is still no admin
        ([f"{LIS}institution/person#Administrator#x"], False),
        ([LEARNER], False),
    ],
)
def test_administrators_are_staff_only_where_the_deployment_opts_in(
    roles: list[str], staff: bool
) -> None:
    assert is_staff(tuple(roles), administrators_are_staff=True) is staff
    assert not is_staff(tuple(roles))


@pytest.mark.parametrize(
    ("role", "name"),
    [
        (INSTRUCTOR, "Instructor"),
        (f"{LIS}membership/Instructor#Grader", "Instructor"),
        ("Learner", "Learner"),
        (INSTITUTION_INSTRUCTOR, None),
        ("", None),
    ],
)
def test_context_role(role: str, name: str | None) -> None:
    assert context_role(role) == name
