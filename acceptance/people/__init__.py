"""People and roles: invitations by e-mail, the People page of an engagement, password reset.

``services`` holds the workflows (engagement domain); ``forms``, ``pages``, ``views`` and
``urls`` are its doors.
"""
